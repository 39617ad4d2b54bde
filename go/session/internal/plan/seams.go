package plan

import (
	"slices"
	"strings"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Device arenas (Env.DeviceArenas). On a provider whose memory is the device's own (CUDA, and
// its stand-in on the host), an instance's arena is device memory: the host cannot view it,
// so every value stays where its producer wrote it and crosses only where the other side
// needs it:
//
//   - a fed input is uploaded when a kernel step reads it (host steps read the caller's
//     tensor itself);
//   - a host step's input that a kernel step produced is downloaded before the step (once a
//     run, however many host steps read it);
//   - a host step's output is uploaded when a kernel step reads it (host steps and graph
//     outputs read the host copy);
//   - a graph output that a kernel step produced is downloaded at the end.
//
// seams lists these crossings per host step; PlanReport.Nodes carries them (PlanNode.Downloads
// and Uploads) and a traced run's host-step spans name them in their reason.

// deviceState is what a device-arena instance keeps besides the arena: per slot, the value's
// bytes on the host for the current run (nil until produced there or downloaded) and the
// reusable buffer a download lands in.
type deviceState struct {
	arena       device.Region
	host        [][]byte
	stage       [][]byte
	kernelReads []bool // by slot: some kernel step reads it
	reads       []device.ReadRequest
	slots       []int
	want        []int // the slots a fetch is asked for (reused: no allocation per run)
}

func (inst *Instance) newDeviceState(t *Template, arena device.Region) {
	reads, _ := t.kernelSlots()
	inst.dev = &deviceState{
		arena:       arena,
		host:        make([][]byte, len(t.Slots)),
		stage:       make([][]byte, len(t.Slots)),
		kernelReads: reads,
	}
}

// kernelSlots says, by slot, whether a kernel step reads the slot's value and whether one
// produces it.
func (t *Template) kernelSlots() (reads, writes []bool) {
	reads, writes = make([]bool, len(t.Slots)), make([]bool, len(t.Slots))
	for _, st := range t.Steps {
		if st.Kind != KernelStep {
			continue
		}
		for _, r := range st.in {
			if !r.fixed && r.Slot >= 0 {
				reads[r.Slot] = true
			}
		}
		for _, r := range st.out {
			if r.Slot >= 0 {
				writes[r.Slot] = true
			}
		}
	}
	return reads, writes
}

// feedDevice starts a run on a device arena: it forgets the last run's host copies, takes the
// fed inputs as host copies and uploads the ones kernels read.
func (t *Template) feedDevice(inst *Instance, ins []tensor.Tensor) error {
	d := inst.dev
	clear(d.host)
	for _, in := range t.Inputs {
		src, _ := ops.RawBytes(ins[in.pos])
		slot := in.Ref.Slot
		d.host[slot] = src
		if !d.kernelReads[slot] || len(src) == 0 {
			continue
		}
		r, err := t.region(d.arena, slot)
		if err != nil {
			return err
		}
		if err := inst.MS.Upload(r, src); err != nil {
			return err
		}
	}
	return nil
}

// fetch downloads, with one wait, the values of slots that have no host copy yet.
func (t *Template) fetch(inst *Instance, slots []int) error {
	d := inst.dev
	d.reads, d.slots = d.reads[:0], d.slots[:0]
	for _, slot := range slots {
		if slot < 0 || d.host[slot] != nil || slices.Contains(d.slots, slot) {
			continue
		}
		n := int(t.Slots[slot].Bytes)
		if cap(d.stage[slot]) < n {
			d.stage[slot] = make([]byte, n)
		}
		buf := d.stage[slot][:n]
		if n == 0 {
			d.host[slot] = buf
			continue
		}
		r, err := t.region(d.arena, slot)
		if err != nil {
			return err
		}
		part, err := r.Slice(0, uint64(n))
		if err != nil {
			return err
		}
		d.reads = append(d.reads, device.ReadRequest{Region: part, Dst: buf})
		d.slots = append(d.slots, slot)
	}
	if len(d.reads) == 0 {
		return nil
	}
	if err := inst.MS.ReadMany(d.reads); err != nil {
		return err
	}
	for i, slot := range d.slots {
		d.host[slot] = d.reads[i].Dst
	}
	return nil
}

// fetchForHostStep brings the values host step st reads (its inputs and its subgraphs' outer
// values) to the host.
func (t *Template) fetchForHostStep(inst *Instance, st *planStep) error {
	slots := inst.dev.want[:0]
	for j, r := range st.in {
		if st.Node.Inputs[j] != "" && !r.fixed {
			slots = append(slots, r.Slot)
		}
	}
	for _, r := range st.implicit {
		if !r.fixed {
			slots = append(slots, r.Slot)
		}
	}
	inst.dev.want = slots
	return t.fetch(inst, slots)
}

// storeHostOutput keeps a host step's output as the slot's host copy and uploads it when a
// kernel step reads it.
func (t *Template) storeHostOutput(inst *Instance, slot int, src []byte) error {
	d := inst.dev
	if src == nil {
		src = []byte{}
	}
	d.host[slot] = src
	if !d.kernelReads[slot] || len(src) == 0 {
		return nil
	}
	r, err := t.region(d.arena, slot)
	if err != nil {
		return err
	}
	return inst.MS.Upload(r, src)
}

// fetchOutputs downloads the graph outputs that kernels wrote, for Execute to copy out of the
// host copies (bound outputs are never kernel-written in place on a device arena).
func (t *Template) fetchOutputs(inst *Instance) error {
	slots := inst.dev.want[:0]
	for _, r := range t.Outputs {
		if !r.fixed {
			slots = append(slots, r.Slot)
		}
	}
	inst.dev.want = slots
	return t.fetch(inst, slots)
}

// spanView is r for a trace span: a view of the arena, or on a device arena its type and shape
// alone (spans describe shapes; reading the device for them would add copies).
func (t *Template) spanView(inst *Instance, r planRef) tensor.Tensor {
	if inst.dev == nil || r.fixed {
		return t.view(inst, r)
	}
	return tensor.Raw(r.dtype, r.shape, nil)
}

// Seam is one host step's crossings on a device arena: the values it downloads (written by
// kernels) and uploads (read by kernels), by name.
type Seam struct {
	Downloads, Uploads []string
}

// String says the crossings as a trace span's reason ends: "device seam: downloads a, b;
// uploads c"; "" for none.
func (s Seam) String() string {
	var parts []string
	if len(s.Downloads) > 0 {
		parts = append(parts, "downloads "+strings.Join(s.Downloads, ", "))
	}
	if len(s.Uploads) > 0 {
		parts = append(parts, "uploads "+strings.Join(s.Uploads, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "device seam: " + strings.Join(parts, "; ")
}

// seams lists the crossings of the host steps that have any, by step index, as a device arena
// makes them (BuildTemplate keeps them on the steps: planStep.Seam).
func (t *Template) seams() map[int]Seam {
	read, written := t.kernelSlots()
	seams := map[int]Seam{}
	for i, st := range t.Steps {
		if st.Kind == KernelStep || st.Kind == jumpStep {
			continue
		}
		var s Seam
		for j, r := range st.in {
			if st.Node.Inputs[j] != "" && !r.fixed && r.Slot >= 0 && written[r.Slot] && !slices.Contains(s.Downloads, st.Node.Inputs[j]) {
				s.Downloads = append(s.Downloads, st.Node.Inputs[j])
			}
		}
		for name, r := range st.implicit {
			if !r.fixed && r.Slot >= 0 && written[r.Slot] {
				s.Downloads = append(s.Downloads, name)
			}
		}
		for j, r := range st.out {
			if r.Slot >= 0 && read[r.Slot] && j < len(st.Node.Outputs) {
				s.Uploads = append(s.Uploads, st.Node.Outputs[j])
			}
		}
		if len(s.Downloads)+len(s.Uploads) > 0 {
			slices.Sort(s.Downloads)
			seams[i] = s
		}
	}
	return seams
}
