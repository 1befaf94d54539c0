package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// A topology is a directed graph of unit-capacity links from one source to
// some terminals (the decoders), each of which may serve hosts behind it.
type topology struct {
	name      string
	source    string
	edges     [][2]string
	terminals []string
	hosts     map[string][]string // terminal → its hosts, in order
}

// butterfly is the classic network of Ahlswede et al.: S sends to t1 and t2;
// C→D is the bottleneck both want. Min-cut 2; the best routing packs Steiner
// trees to 1.5.
func butterfly() topology {
	return topology{name: "butterfly", source: "S",
		edges: [][2]string{{"S", "A"}, {"S", "B"}, {"A", "C"}, {"B", "C"}, {"C", "D"},
			{"A", "T1"}, {"B", "T2"}, {"D", "T1"}, {"D", "T2"}},
		terminals: []string{"T1", "T2"}}
}

// codedIP is shaped like CODED IP's 22-node testbed (Fig. 3): a source, six
// core switches A–F that recode, three edge switches G, H, I that decode, and
// 5, 3 and 4 hosts behind them. D is a butterfly-like bottleneck: it is the
// only way from B to G and from A to I.
func codedIP() topology {
	t := topology{name: "coded-ip-22", source: "S",
		edges: [][2]string{{"S", "A"}, {"S", "B"}, {"A", "C"}, {"A", "D"}, {"B", "D"}, {"B", "E"}, {"D", "F"},
			{"C", "G"}, {"C", "H"}, {"E", "H"}, {"E", "I"}, {"F", "G"}, {"F", "I"}},
		terminals: []string{"G", "H", "I"}, hosts: map[string][]string{}}
	n := 1
	for _, e := range []struct {
		sw    string
		hosts int
	}{{"G", 5}, {"H", 3}, {"I", 4}} {
		for i := 0; i < e.hosts; i++ {
			t.hosts[e.sw] = append(t.hosts[e.sw], fmt.Sprintf("h%d", n))
			n++
		}
	}
	return t
}

func (t *topology) nodes() []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	add(t.source)
	for _, e := range t.edges {
		add(e[0])
		add(e[1])
	}
	return out
}

func (t *topology) out(n string) (out []string) {
	for _, e := range t.edges {
		if e[0] == n {
			out = append(out, e[1])
		}
	}
	return out
}

func (t *topology) in(n string) (in []string) {
	for _, e := range t.edges {
		if e[1] == n {
			in = append(in, e[0])
		}
	}
	return in
}

func (t *topology) isTerminal(n string) bool { return slices.Contains(t.terminals, n) }

// hops is the number of links from the source to n in tree, or -1 when the
// tree does not reach n.
func (t *topology) hops(tree [][2]string, n string) int {
	d := 0
	for n != t.source {
		up := ""
		for _, e := range tree {
			if e[1] == n {
				up = e[0]
			}
		}
		if up == "" {
			return -1
		}
		n = up
		d++
	}
	return d
}

// minCut is the max-flow from the source to sink with unit capacities
// (augmenting paths on the residual graph).
func (t *topology) minCut(sink string) int {
	res := map[[2]string]int{}
	for _, e := range t.edges {
		res[e]++
	}
	flow := 0
	for {
		prev := map[string]string{t.source: ""}
		queue := []string{t.source}
		for len(queue) > 0 && prev[sink] == "" {
			u := queue[0]
			queue = queue[1:]
			for _, v := range t.nodes() {
				if _, seen := prev[v]; !seen && res[[2]string{u, v}] > 0 {
					prev[v] = u
					queue = append(queue, v)
				}
			}
		}
		if _, ok := prev[sink]; !ok {
			return flow
		}
		for v := sink; v != t.source; v = prev[v] {
			u := prev[v]
			res[[2]string{u, v}]--
			res[[2]string{v, u}]++
		}
		flow++
	}
}

// paths lists every simple path from the source to n (the graphs are DAGs).
func (t *topology) paths(n string) [][]string {
	if n == t.source {
		return [][]string{{t.source}}
	}
	var out [][]string
	for _, u := range t.in(n) {
		for _, p := range t.paths(u) {
			out = append(out, append(append([]string(nil), p...), n))
		}
	}
	return out
}

// steinerTrees enumerates the minimal Steiner arborescences rooted at the
// source that reach every terminal: one path per terminal, whose union gives
// every node one parent. Each tree is its sorted list of edges.
func (t *topology) steinerTrees() [][][2]string {
	per := make([][][]string, len(t.terminals))
	for i, term := range t.terminals {
		per[i] = t.paths(term)
	}
	seen := map[string]bool{}
	var trees [][][2]string
	idx := make([]int, len(per))
	for {
		parent := map[string]string{}
		ok := true
		edges := map[[2]string]bool{}
		for i, j := range idx {
			p := per[i][j]
			for k := 1; k < len(p); k++ {
				if q, has := parent[p[k]]; has && q != p[k-1] {
					ok = false
				}
				parent[p[k]] = p[k-1]
				edges[[2]string{p[k-1], p[k]}] = true
			}
		}
		if ok {
			var list [][2]string
			for e := range edges {
				list = append(list, e)
			}
			sort.Slice(list, func(a, b int) bool { return list[a][0]+list[a][1] < list[b][0]+list[b][1] })
			key := fmt.Sprint(list)
			if !seen[key] {
				seen[key] = true
				trees = append(trees, list)
			}
		}
		// Next combination.
		i := 0
		for ; i < len(idx); i++ {
			idx[i]++
			if idx[i] < len(per[i]) {
				break
			}
			idx[i] = 0
		}
		if i == len(idx) {
			return trees
		}
	}
}

// steinerPacking is the best multicast rate routing alone reaches: the
// optimal fractional packing of Steiner trees into the unit link
// capacities, max Σ x_T subject to Σ_{T ∋ e} x_T ≤ 1 for every link, by the
// simplex method. It returns the optimum, every minimal Steiner tree and the
// weight x_T of each in an optimal packing (most are 0: a basic solution).
func (t *topology) steinerPacking() (float64, [][][2]string, []float64) {
	trees := t.steinerTrees()
	a := make([][]float64, len(t.edges))
	for i, e := range t.edges {
		a[i] = make([]float64, len(trees))
		for j, tr := range trees {
			for _, te := range tr {
				if te == e {
					a[i][j] = 1
				}
			}
		}
	}
	b := make([]float64, len(t.edges))
	c := make([]float64, len(trees))
	for i := range b {
		b[i] = 1
	}
	for j := range c {
		c[j] = 1
	}
	v, x := simplex(a, b, c)
	return v, trees, x
}

// simplex maximises c·x subject to A·x ≤ b, x ≥ 0, for b ≥ 0 (the slack
// basis is feasible), with Bland's rule against cycling. It returns the
// optimum and a solution x that reaches it (nil when unbounded).
func simplex(a [][]float64, b, c []float64) (float64, []float64) {
	m, n := len(a), len(c)
	// Tableau: m rows of [A | I | b], objective row [-c | 0 | 0].
	w := n + m + 1
	tab := make([][]float64, m+1)
	for i := 0; i < m; i++ {
		tab[i] = make([]float64, w)
		copy(tab[i], a[i])
		tab[i][n+i] = 1
		tab[i][w-1] = b[i]
	}
	tab[m] = make([]float64, w)
	for j := 0; j < n; j++ {
		tab[m][j] = -c[j]
	}
	basis := make([]int, m)
	for i := range basis {
		basis[i] = n + i
	}
	const eps = 1e-9
	for {
		col := -1
		for j := 0; j < n+m; j++ {
			if tab[m][j] < -eps {
				col = j
				break
			}
		}
		if col < 0 {
			// Optimal: the basic variables take the right-hand side, the
			// others are 0.
			x := make([]float64, n)
			for i, v := range basis {
				if v < n {
					x[v] = tab[i][w-1]
				}
			}
			return tab[m][w-1], x
		}
		row := -1
		best := math.Inf(1)
		for i := 0; i < m; i++ {
			if tab[i][col] > eps {
				r := tab[i][w-1] / tab[i][col]
				if r < best-eps || (math.Abs(r-best) <= eps && basis[i] < basis[row]) {
					best, row = r, i
				}
			}
		}
		if row < 0 {
			return math.Inf(1), nil
		}
		pv := tab[row][col]
		for j := range tab[row] {
			tab[row][j] /= pv
		}
		for i := range tab {
			if i != row && tab[i][col] != 0 {
				f := tab[i][col]
				for j := range tab[i] {
					tab[i][j] -= f * tab[row][j]
				}
			}
		}
		basis[row] = col
	}
}

func (t *topology) String() string {
	var es []string
	for _, e := range t.edges {
		es = append(es, e[0]+"→"+e[1])
	}
	return t.name + ": " + strings.Join(es, " ")
}
