package session

// fallbackReport lists the top-level nodes whose placement is not on the requested provider.
func (s *InferenceSession) fallbackReport() []FallbackEntry {
	out := []FallbackEntry{}
	for _, n := range s.eng.Model.Graph.Nodes {
		if p := s.eng.Placements.Of(n); p.Fallback != "" {
			out = append(out, FallbackEntry{Node: n.Name, Op: n.OpType, Provider: p.Provider, Reason: p.Fallback})
		}
	}
	return out
}
