// Package modelmem holds the memory a loaded model owns outside the Go heap: the mappings of
// its external data files (Mappings) and the anonymous mapping its file loader copies large
// initializers into (Store). A graph.Model releases both at Close.
package modelmem
