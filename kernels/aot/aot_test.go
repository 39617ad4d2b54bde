package aot

import (
	"bytes"
	"compress/gzip"
	"reflect"
	"testing"
	"testing/fstest"
	"unsafe"
)

// withTables runs f with the registry holding only ts (the generated packages' tables are not
// linked into this test), and restores it.
func withTables(t *testing.T, ts ...*Table) {
	t.Helper()
	mu.Lock()
	saved, savedIndex := tables, index
	tables, index = nil, nil
	mu.Unlock()
	for _, tb := range ts {
		RegisterTable(tb)
	}
	t.Cleanup(func() {
		mu.Lock()
		tables, index = saved, savedIndex
		mu.Unlock()
	})
}

func TestLookupMakesEachVariantOnce(t *testing.T) {
	var asked []int
	host := &Table{
		HostEntries: func(i int) (unsafe.Pointer, int) { asked = append(asked, i); return nil, 10 + i },
		Entries: []Entry{
			{File: "a.loom", Symbol: "k", Config: "MR=4,NV=2", Target: "host-x86_64-v3", Key: "k0", Module: "m0", Metadata: "{}"},
			{File: "a.loom", Symbol: "j", Config: "", Target: "host-x86_64-v3", Key: "k1", Module: "m1", Metadata: "{}"},
		},
	}
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte("abc"))
	z.Close()
	cuda := &Table{
		Compiler: "NVRTC 12.9",
		Images:   fstest.MapFS{"cubin/k2.gz": {Data: gz.Bytes()}},
		Entries: []Entry{
			{File: "a.loom", Symbol: "k", Config: "MR=4", Target: "sm_90", Key: "k2", Module: "m2", Image: "cubin/k2.gz", Metadata: "{}"},
		},
	}
	withTables(t, host, cuda)

	v, ok := Lookup("k0")
	if !ok {
		t.Fatal("k0 not found")
	}
	if want := map[string]string{"MR": "4", "NV": "2"}; !reflect.DeepEqual(v.Config, want) {
		t.Errorf("k0's Config = %v, want %v", v.Config, want)
	}
	if v.Image != nil || v.Entries == nil || v.Compiler != "" {
		t.Errorf("k0 is host code: Image %v, Entries %v, Compiler %q", v.Image != nil, v.Entries != nil, v.Compiler)
	}
	if _, n := v.Entries(); n != 10 {
		t.Errorf("k0's entries: %d, want the table's entries for index 0 (10)", n)
	}
	again, _ := Lookup("k0")
	if again != v {
		t.Error("a second Lookup made another *Variant")
	}
	v1, _ := Lookup("k1")
	if _, n := v1.Entries(); n != 11 || len(v1.Config) != 0 || v1.Config == nil {
		t.Errorf("k1: entries %d (want 11), Config %#v (want an empty map)", n, v1.Config)
	}
	if !reflect.DeepEqual(asked, []int{0, 1}) {
		t.Errorf("HostEntries was asked for %v, want [0 1]", asked)
	}

	c, ok := Lookup("k2")
	if !ok || c.Entries != nil || c.Image == nil || c.Compiler != "NVRTC 12.9" || c.Target != "sm_90" {
		t.Fatalf("k2: %+v", c)
	}
	img, err := c.Image()
	if err != nil || string(img) != "abc" {
		t.Errorf("k2's image: %q, %v", img, err)
	}
	if _, ok := Lookup("absent"); ok {
		t.Error("an absent key was found")
	}

	all := Variants()
	if len(all) != 3 || all[0] != v || all[1] != v1 || all[2] != c {
		t.Errorf("Variants() = %v, want the three variants made by Lookup, by module", all)
	}
}

func TestALaterTableIsSeen(t *testing.T) {
	withTables(t, &Table{Entries: []Entry{{Key: "a", Module: "ma"}}})
	if _, ok := Lookup("b"); ok {
		t.Fatal("b found before it was registered")
	}
	RegisterTable(&Table{Entries: []Entry{{Key: "b", Module: "mb"}}})
	if v, ok := Lookup("b"); !ok || v.Module != "mb" {
		t.Fatalf("b registered after the first Lookup: %v, %v", v, ok)
	}
}

func TestConfigRoundTrip(t *testing.T) {
	for _, cfg := range []map[string]string{{}, {"A": "1"}, {"VL": "8", "ACT": "5", "PACKA": "false"}} {
		s := FormatConfig(cfg)
		if got := ParseConfig(s); !reflect.DeepEqual(got, cfg) {
			t.Errorf("ParseConfig(FormatConfig(%v) = %q) = %v", cfg, s, got)
		}
	}
	if got := FormatConfig(map[string]string{"VL": "8", "ACT": "5"}); got != "ACT=5,VL=8" {
		t.Errorf("FormatConfig sorts by key: %q", got)
	}
}
