package config

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// indexCases are documents with the line of some of their key paths. Every
// document is valid TOML: the test also checks that BurntSushi accepts it and
// that each key it reports is in the index.
var indexCases = []struct {
	name  string
	doc   string
	lines map[string]int
}{
	{
		name: "tables and dotted keys",
		doc: `a = 1
[engine]
poll = "busy"
x.y.z = 2
[b.c]
d = 3
`,
		lines: map[string]int{"a": 1, "engine": 2, "engine.poll": 3, "engine.x": 4, "engine.x.y.z": 4, "b": 5, "b.c": 5, "b.c.d": 6},
	},
	{
		name: "arrays of tables with several elements",
		doc: `[[pipelines]]
name = "a"
[[pipelines.stages]]
kind = "x"
[[pipelines.stages]]
kind = "y"
delay = "1ms"
[[pipelines]]
name = "b"
[pipelines.extra]
k = 1
[[pipelines.stages]]
kind = "z"
`,
		lines: map[string]int{
			"pipelines": 1, "pipelines[0]": 1, "pipelines[0].name": 2,
			"pipelines[0].stages[0]": 3, "pipelines[0].stages[0].kind": 4,
			"pipelines[0].stages[1]": 5, "pipelines[0].stages[1].delay": 7,
			"pipelines[1]": 8, "pipelines[1].name": 9, "pipelines[1].extra": 10, "pipelines[1].extra.k": 11,
			"pipelines[1].stages[0]": 12, "pipelines[1].stages[0].kind": 13,
		},
	},
	{
		name: "inline tables and arrays of inline tables across lines",
		doc: `port = { name = "m0", mtu = 1500 }
stages = [
  { kind = "a" },   # first
  { kind = "b", opts = { deep = [1, 2] } },
]
nested = [[{ k = 1 }], [{ k = 2 }]]
multi = {
  a = 1,   # TOML 1.1: inline tables may span lines
  b = 2,
}
`,
		lines: map[string]int{
			"port": 1, "port.name": 1, "port.mtu": 1,
			"stages": 2, "stages[0]": 3, "stages[0].kind": 3, "stages[1].kind": 4,
			"stages[1].opts.deep": 4, "stages[1].opts.deep[1]": 4,
			"nested[1][0].k": 6, "multi.a": 8, "multi.b": 9,
		},
	},
	{
		name: "comments and strings that look like TOML",
		doc: `# [[pipelines]]  name = "no"
a = "[x] # not a comment" # [y]
b = """
[[pipelines]]
c = 1 # not a key
"""
d = '''
'q' = 2
'''
e = """quote at the end"""""
f = 'lit # x'
g = "esc \" [z]"
h = """\
  continued \
  """
i = 1
`,
		lines: map[string]int{"a": 2, "b": 3, "d": 7, "e": 10, "f": 11, "g": 12, "h": 13, "i": 16},
	},
	{
		name: "quoted keys",
		doc: `"a.b" = 1
[ "t x" . 'u' ]
"k\u0041" = 2
[[ "arr" ]]
v = 3
`,
		lines: map[string]int{`"a.b"`: 1, `"t x"`: 2, `"t x".u`: 2, `"t x".u.kA`: 3, "arr[0]": 4, "arr[0].v": 5},
	},
	{
		name: "dates and arrays over lines",
		doc: `when = 1979-05-27 07:32:00Z
day = 1979-05-27
lcores = [
  1,
  # two
  2,
]
x = 1
`,
		lines: map[string]int{"when": 1, "day": 2, "lcores": 3, "lcores[0]": 4, "lcores[1]": 6, "x": 8},
	},
	{
		name:  "CRLF and byte order mark",
		doc:   "\xef\xbb\xbfa = 1\r\n[t]\r\nb = 2\r\n",
		lines: map[string]int{"a": 1, "t": 2, "t.b": 3},
	},
	{
		name: "nested arrays of tables",
		doc: `[[a]]
[[a.b]]
x = 1
[[a.b]]
x = 2
[[a]]
[[a.b]]
x = 3
[a.c]
y = 4
`,
		lines: map[string]int{"a[0].b[0].x": 3, "a[0].b[1].x": 5, "a[1]": 6, "a[1].b[0].x": 8, "a[1].c.y": 10},
	},
}

func TestIndexLines(t *testing.T) {
	for _, c := range indexCases {
		t.Run(c.name, func(t *testing.T) {
			var v map[string]any
			md, err := toml.Decode(c.doc, &v)
			if err != nil {
				t.Fatalf("BurntSushi rejects the test document: %v", err)
			}
			ix := buildIndex([]byte(c.doc))
			for path, want := range c.lines {
				e, ok := ix.lines[path]
				if !ok {
					t.Errorf("%s: not in the index", path)
					continue
				}
				if e.line != want {
					t.Errorf("%s: line %d, want %d", path, e.line, want)
				}
			}
			checkKeysIndexed(t, md, ix)
		})
	}
}

// checkKeysIndexed asserts that every key BurntSushi reports is in the index.
func checkKeysIndexed(t *testing.T, md toml.MetaData, ix *index) {
	t.Helper()
	for _, k := range md.Keys() {
		if _, ok := ix.plain[k.String()]; !ok {
			t.Errorf("key %s (from MetaData.Keys) is not in the index", k)
		}
	}
}

func TestIndexLineFallsBackToParent(t *testing.T) {
	ix := buildIndex([]byte("[[ports]]\nname = \"a\"\n[[ports]]\nname = \"b\"\n"))
	for path, want := range map[string]int{
		"ports[1].mtu":   3, // left out: reported at its table
		"ports[1].name":  4,
		`ports[1]."x.y"`: 3,
		"nothing":        0,
	} {
		if got := ix.line(path); got != want {
			t.Errorf("line(%s) = %d, want %d", path, got, want)
		}
	}
}

func TestParentPath(t *testing.T) {
	for in, want := range map[string]string{
		"a":                            "",
		"a.b":                          "a",
		"a.b[2]":                       "a.b",
		"a[0][1]":                      "a[0]",
		`a."b.c"`:                      "a",
		`"b.c"`:                        "",
		`a."x\".y"`:                    "a",
		`"a.b".c`:                      `"a.b"`,
		`a."q\\"`:                      "a",
		`pipelines[0].stages[2].delay`: "pipelines[0].stages[2]",
	} {
		if got := parentPath(in); got != want {
			t.Errorf("parentPath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestResolveSyntaxErrorKey(t *testing.T) {
	doc := "[[pipelines]]\nname = \"a\"\n[[pipelines]]\nname = \"b\"\nname = \"c\"\n"
	_, err := Parse("dup.toml", []byte(doc))
	want := `dup.toml:5: pipelines[1].name: Key 'pipelines.name' has already been defined.`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// FuzzIndex checks that the position index never panics and, on any document
// BurntSushi accepts, holds every key BurntSushi reports. Parse must not panic
// on any input either.
func FuzzIndex(f *testing.F) {
	for _, c := range indexCases {
		f.Add([]byte(c.doc))
	}
	f.Add(Lab())
	for _, c := range parseErrorCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ix := buildIndex(data)
		for path := range ix.lines {
			_ = ix.line(path + ".child")
		}
		_, _ = Parse("fuzz.toml", data)
		var v map[string]any
		md, err := toml.Decode(string(data), &v)
		if err != nil {
			return
		}
		for _, k := range md.Keys() {
			if _, ok := ix.plain[k.String()]; !ok {
				t.Fatalf("key %s is not in the index of %q", k, strings.TrimSpace(string(data)))
			}
		}
	})
}
