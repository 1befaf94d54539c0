package packaging

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// dep5 is a machine-readable copyright file's paragraphs, each a map of its
// fields (a field's continuation lines joined by newlines).
func dep5(t *testing.T, text string) []map[string]string {
	t.Helper()
	var paras []map[string]string
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		p := map[string]string{}
		key := ""
		for _, l := range strings.Split(block, "\n") {
			if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				if key == "" {
					t.Fatalf("a continuation line before any field: %q", l)
				}
				p[key] += "\n" + strings.TrimSpace(l)
				continue
			}
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				t.Fatalf("copyright: not a field: %q", l)
			}
			key = k
			p[k] = strings.TrimSpace(v)
		}
		paras = append(paras, p)
	}
	return paras
}

// TestCopyright: the repository has a licence (LICENSE, Apache-2.0), the
// package says it in a DEP-5 copyright file, and every Go module linked
// into the binary (go version -m), the standard library too, has a Files
// paragraph naming its licence, whose text the file carries (or points to
// in /usr/share/common-licenses).
func TestCopyright(t *testing.T) {
	lic, err := os.ReadFile("../LICENSE")
	if err != nil || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0, January 2004") {
		t.Fatalf("LICENSE at the repository's root is not the Apache License 2.0: %v", err)
	}
	b, err := os.ReadFile("copyright")
	if err != nil {
		t.Fatal(err)
	}
	paras := dep5(t, string(b))
	if paras[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Errorf("the first paragraph is no DEP-5 header: %v", paras[0])
	}
	files := map[string]string{} // Files pattern → License
	texts := map[string]bool{}   // stand-alone License paragraphs with a text
	for _, p := range paras[1:] {
		switch {
		case p["Files"] != "":
			if p["Copyright"] == "" || p["License"] == "" {
				t.Errorf("Files: %s has no Copyright or no License", p["Files"])
			}
			for _, f := range strings.Fields(p["Files"]) {
				files[f] = p["License"]
			}
		case p["License"] != "":
			name, text, _ := strings.Cut(p["License"], "\n")
			if len(strings.TrimSpace(text)) < 100 {
				t.Errorf("License: %s has no text", name)
			}
			if texts[name] {
				t.Errorf("License: %s twice", name)
			}
			texts[name] = true
		default:
			t.Errorf("a paragraph with neither Files nor License: %v", p)
		}
	}
	if files["*"] != "Apache-2.0" {
		t.Errorf("Files: * is %q, not Apache-2.0", files["*"])
	}
	if !strings.Contains(string(b), "/usr/share/common-licenses/Apache-2.0") {
		t.Error("the Apache-2.0 paragraph does not point to /usr/share/common-licenses/Apache-2.0")
	}
	out, err := exec.Command("go", "version", "-m", linerateBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	mods := []string{"std"}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "dep" {
			mods = append(mods, f[1])
		}
	}
	if len(mods) < 10 {
		t.Fatalf("go version -m lists %d modules:\n%s", len(mods), out)
	}
	used := map[string]bool{}
	for _, m := range mods {
		l, ok := files["go/"+m+"/*"]
		if !ok {
			t.Errorf("linked module %s has no Files: go/%s/* paragraph in packaging/copyright", m, m)
			continue
		}
		for _, name := range strings.Split(strings.ReplaceAll(l, " or ", " and "), " and ") {
			used[name] = true
			if !texts[name] {
				t.Errorf("module %s: licence %s has no License paragraph", m, name)
			}
		}
	}
	used[files["*"]] = true
	for name := range texts {
		if !used[name] {
			t.Errorf("License: %s is used by no Files paragraph", name)
		}
	}
	// nfpm's license field, the package's control data, agrees.
	for _, y := range []string{"nfpm.yaml", "nfpm-dpdk.yaml"} {
		if b, err := os.ReadFile(y); err != nil || !strings.Contains(string(b), "\nlicense: Apache-2.0\n") {
			t.Errorf("%s: no license: Apache-2.0 (%v)", y, err)
		}
	}
}
