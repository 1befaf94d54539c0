package config

import (
	"errors"
	"strings"
	"testing"
)

// A section belongs to its owner: the file keeps its keys for it, the owner's
// check runs at Parse with file:line errors, and a top-level key no owner
// registered is unknown, with the closest name suggested.
func TestSections(t *testing.T) {
	type lab struct {
		EALArgs []string `toml:"eal_args"`
		Memory  ByteSize `toml:"memory"`
	}
	RegisterSection(Section{Name: "test_lab", Check: func(f *File, t Table) error {
		var s struct {
			Lab lab `toml:"test_lab"`
		}
		if err := t.Decode(&s); err != nil {
			return err
		}
		if s.Lab.Memory > 1<<30 {
			return t.Error("test_lab.memory", errors.New("more than 1GiB"))
		}
		return nil
	}})
	RegisterSection(Section{Name: "test_absent", Absent: "in another build"})
	doc := func(body string) string {
		return "version = 1\n[control]\nlisten = \"\"\n" + body + "[[pipelines]]\nname = \"p\"\n[[pipelines.stages]]\nkind = \"sink\"\n"
	}
	f, err := Parse("x.toml", []byte(doc("[test_lab]\neal_args = [\"--no-huge\"]\nmemory = \"256MiB\"\n[test_absent]\nx = 1\n")))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Lab lab `toml:"test_lab"`
	}
	if err := f.Section("test_lab").Decode(&got); err != nil || len(got.Lab.EALArgs) != 1 || got.Lab.Memory != 256<<20 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := f.Section("nothing").Decode(&got); err != nil {
		t.Errorf("an absent section: %v", err)
	}
	for body, want := range map[string]string{
		"[test_lab]\nmemory = \"2GiB\"\n":   "x.toml:5: test_lab.memory: more than 1GiB",
		"[test_lab]\nmemroy = \"1MiB\"\n":   `x.toml:5: test_lab.memroy: unknown key (did you mean "memory"?)`,
		"[test_lba]\nmemory = \"1MiB\"\n":   `x.toml:4: test_lba: unknown key (did you mean "test_lab"?)`,
		"[[test_lab]]\nmemory = \"1MiB\"\n": "x.toml:4: test_lab: expected a table",
	} {
		_, err := Parse("x.toml", []byte(doc(body)))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %s", body, err, want)
		}
	}
}
