package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/linerate/linerate/plugins/stagetest"
)

// TestSamplerInProcess runs the sampler with the stage test harness, as any
// in-process stage: one packet in every N is sampled and exported, every
// packet continues, and Process allocates nothing.
func TestSamplerInProcess(t *testing.T) {
	h := stagetest.NewHarness(t, 1_700_000_000_000_000_000)
	h.NewPool("default", 256, 2048)
	out := filepath.Join(t.TempDir(), "samples.pcap")
	st, err := newSampler(h.Setup("sampler", "every = 10\nexport = \""+out+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 300)
	for i := range frame {
		frame[i] = byte(i)
	}
	for burst := 0; burst < 20; burst++ {
		b := h.Burst(0)
		for i := 0; i < 50; i++ {
			b.Push(h.Pkt(frame, 0))
		}
		o := h.Run(b, st)
		if len(o.Continued) != 50 {
			t.Fatalf("burst %d: %d of 50 continued", burst, len(o.Continued))
		}
		for _, c := range o.Continued {
			stagetest.TakeData(c)
		}
	}
	if n := h.StageCounter("sampler#0", "sampled"); n != 100 {
		t.Errorf("sampled %d of 1000, want 100", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.(*sampler).exp.count.Load() < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("%d samples exported", st.(*sampler).exp.count.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f) // the oracle: gopacket reads the file
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if len(data) != snapLen || ci.Length != 300 || data[255] != 255 {
			t.Fatalf("record %d: %d bytes of %d", n, len(data), ci.Length)
		}
		n++
	}
	if n != 100 {
		t.Errorf("%d records in the pcap file, want 100", n)
	}
	b := h.Burst(0)
	for i := 0; i < 50; i++ {
		b.Push(h.Pkt(frame, 0))
	}
	ctx := h.Ctx
	if a := testing.AllocsPerRun(100, func() { st.Process(&ctx, b) }); a != 0 {
		t.Errorf("Process allocates %.1f times a burst", a)
	}
	o := h.Run(b, st)
	for _, c := range o.Continued {
		stagetest.TakeData(c)
	}
}
