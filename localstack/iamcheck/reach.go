package iamcheck

import (
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/rta"
	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

// The static side of the check: every AWS SDK operation a deployed
// function's code can reach, whether the scenario called it or not.

const (
	sdkModule    = "github.com/aws/aws-sdk-go-v2"
	sdkServices  = sdkModule + "/service/"
	smithyModule = "github.com/aws/smithy-go"
	lambdaStart  = "github.com/aws/aws-lambda-go/lambda"
)

// Operation is one SDK operation a function's code can reach.
type Operation struct {
	// Function is the deployed function (functions/<name>).
	Function string
	// Call is the SDK method called, "dynamodb.PutItem",
	// "s3.PresignPutObject"; a transaction's item is named by its part,
	// "dynamodb.TransactWriteItems (Delete)".
	Call string
	// Actions are the IAM actions it needs (OperationActions).
	Actions []string
	// Path is the shortest call chain from the function's main to the
	// call, main first, the SDK method last.
	Path []string
}

// ChainString is the path as one line.
func (o Operation) ChainString() string { return strings.Join(o.Path, " → ") }

// ReachConfig says what Reach analyses.
type ReachConfig struct {
	// Dir is the module's root; Patterns the main packages
	// ("./functions/..."), each one deployed function named by its
	// directory.
	Dir      string
	Patterns []string
	// Tags are the build tags the functions are built with
	// (resources.LambdaBuildTags); GOOS and GOARCH are Lambda's.
	Tags string
	// StandIns are functions (their full SSA names, as ssa.Function
	// String gives them) the graph does not enter: local stand-ins the
	// deployed function never runs. Packages under LocalPrefix are never
	// entered either.
	StandIns []string
	// LocalPrefix is the import path prefix of the local stack's
	// packages (github.com/conveyor/conveyor/localstack/).
	LocalPrefix string
}

// Reachability is Reach's answer.
type Reachability struct {
	// Operations are the reachable operations of every function, sorted by
	// function and call.
	Operations []Operation
	// StandIns are the configured stand-ins some function's graph met (and
	// did not enter), by function.
	StandIns map[string][]string
	// Load, Build and Analyse are where the time went.
	Load, Build, Analyse time.Duration
	// Functions is the number of SSA functions reachable per function.
	Functions map[string]int
}

// Reach builds each main package's call graph from its main (and package
// initialisers) and returns the SDK operations reachable in it. The graph
// is Rapid Type Analysis refined by Variable Type Analysis
// (golang.org/x/tools/go/callgraph), with two steps of its own where a
// function's wiring defeats them:
//
//   - lambda.Start takes the handler as an interface{} and calls it by
//     reflection: the functions that value can hold (traced back through
//     the program, resolve) are its callees;
//   - a call of a func value whose VTA callees are several (VTA merges a
//     struct type's field across every value of that type, so each
//     handler.Function[H]'s New would reach every function of the same
//     handler type) keeps those the value can be traced to, when the
//     trace is complete.
//
// The SDK's own code is not analysed (its packages are type-checked, not
// built): a call to a method of a service client (or its presign client,
// or a paginator's NextPage) is an operation, whoever the caller, and the
// SDK's internal requests (credentials, endpoint discovery) are not the
// function's.
func Reach(c ReachConfig) (*Reachability, error) {
	out := &Reachability{StandIns: map[string][]string{}, Functions: map[string]int{}}
	t0 := time.Now()
	env := append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=-trimpath")
	pcfg := &packages.Config{Mode: packages.LoadAllSyntax, Dir: c.Dir, Env: env}
	if c.Tags != "" {
		pcfg.BuildFlags = []string{"-tags=" + c.Tags}
	}
	pkgs, err := packages.Load(pcfg, c.Patterns...)
	if err != nil {
		return nil, err
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading %v: %s", c.Patterns, strings.Join(errs, "; "))
	}
	out.Load = time.Since(t0)

	t1 := time.Now()
	prog, mains := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	var build []*ssa.Package
	for _, p := range prog.AllPackages() {
		if !isSDK(p.Pkg.Path()) {
			build = append(build, p)
		}
	}
	parallel(len(build), func(i int) { build[i].Build() })
	out.Build = time.Since(t1)

	t2 := time.Now()
	standIns := map[string]bool{}
	for _, s := range c.StandIns {
		standIns[s] = true
	}
	var allRoots [][]*ssa.Function
	for i, m := range mains {
		if m == nil || m.Pkg.Name() != "main" {
			return nil, fmt.Errorf("%s is not a main package", pkgs[i].PkgPath)
		}
		allRoots = append(allRoots, roots(m))
	}
	shared := sharedGraph(standIns, c.LocalPrefix, allRoots)
	type result struct {
		fn  string
		ops []Operation
		met []string
		n   int
	}
	results := make([]result, len(mains))
	parallel(len(mains), func(i int) {
		m := mains[i]
		fn := path.Base(m.Pkg.Path())
		a := &analysis{standIns: standIns, local: c.LocalPrefix, addrTaken: shared.addrTaken}
		ops, met, n := a.run(fn, m, shared)
		results[i] = result{fn, ops, met, n}
	})
	for _, r := range results {
		out.Operations = append(out.Operations, r.ops...)
		if len(r.met) > 0 {
			out.StandIns[r.fn] = r.met
		}
		out.Functions[r.fn] = r.n
	}
	out.Analyse = time.Since(t2)
	sort.Slice(out.Operations, func(i, j int) bool {
		a, b := out.Operations[i], out.Operations[j]
		if a.Function != b.Function {
			return a.Function < b.Function
		}
		return a.Call < b.Call
	})
	return out, nil
}

// parallel runs do(0) … do(n-1), as many at a time as there are
// processors.
func parallel(n int, do func(int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				do(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

func isSDK(pkg string) bool {
	return pkg == sdkModule || strings.HasPrefix(pkg, sdkModule+"/") || pkg == smithyModule || strings.HasPrefix(pkg, smithyModule+"/")
}

// analysis is one function's.
type analysis struct {
	standIns map[string]bool
	local    string

	roots []*ssa.Function
	graph *callgraph.Graph
	// addrTaken are the functions RTA found address-taken: what a
	// reflective call may reach when its value cannot be traced.
	addrTaken []*ssa.Function
	*index
	// reached is the functions the graph is over.
	reached map[*ssa.Function]bool
	budget  int
}

func roots(m *ssa.Package) []*ssa.Function {
	var out []*ssa.Function
	for _, name := range []string{"init", "main"} {
		if f := m.Func(name); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// shared is the graph of every function at once: RTA refined by VTA.
type shared struct {
	index     *index
	graph     *callgraph.Graph
	funcs     map[*ssa.Function]bool
	addrTaken []*ssa.Function
}

// sharedGraph is VTA's graph over what RTA reaches from every function's
// roots, then VTA's again over what walks from them reach in it.
func sharedGraph(standIns map[string]bool, local string, roots [][]*ssa.Function) shared {
	var all []*ssa.Function
	for _, r := range roots {
		all = append(all, r...)
	}
	res := rta.Analyze(all, true)
	s := shared{funcs: map[*ssa.Function]bool{}}
	for f, r := range res.Reachable {
		s.funcs[f] = true
		if r.AddrTaken {
			s.addrTaken = append(s.addrTaken, f)
		}
	}
	sort.Slice(s.addrTaken, func(i, j int) bool { return s.addrTaken[i].String() < s.addrTaken[j].String() })
	s.graph = vta.CallGraph(s.funcs, res.CallGraph)
	s.index = newIndex(s.funcs)
	reached := make([]map[*ssa.Function]bool, len(roots))
	parallel(len(roots), func(i int) {
		a := &analysis{standIns: standIns, local: local, addrTaken: s.addrTaken, roots: roots[i], graph: s.graph, index: s.index, reached: s.funcs}
		reached[i] = a.walk().reached
	})
	union := map[*ssa.Function]bool{}
	for _, r := range reached {
		for f := range r {
			union[f] = true
		}
	}
	s.graph = vta.CallGraph(union, s.graph)
	s.funcs = union
	return s
}

func (a *analysis) run(fn string, m *ssa.Package, sh shared) ([]Operation, []string, int) {
	a.roots = roots(m)
	a.graph = sh.graph
	a.index, a.reached = sh.index, sh.funcs
	w := a.walk()
	// Each round's graph is VTA's over the functions the last walk
	// reached: what an unreachable function stores no longer flows. Two
	// rounds over the function's own reach (after two over every
	// function's) reach the fixed point of the operations here (one
	// leaves the HTTP functions with each other's routes).
	for range 2 {
		a.graph = vta.CallGraph(w.reached, a.graph)
		a.reached = w.reached
		w = a.walk()
	}
	return w.operations(fn), w.standIns(), len(w.reached)
}

// index is, for the tracer, every store, field address and closure of
// the program's reachable functions, and the functions that hand a
// global's address on; each use filters them by the functions an
// analysis reached.
type index struct {
	stores     map[ssa.Value][]*ssa.Store
	fieldAddrs map[*ssa.Global][]*ssa.FieldAddr
	closures   map[*ssa.Function][]*ssa.MakeClosure
	escapes    map[*ssa.Global][]*ssa.Function
}

func newIndex(funcs map[*ssa.Function]bool) *index {
	x := &index{stores: map[ssa.Value][]*ssa.Store{}, fieldAddrs: map[*ssa.Global][]*ssa.FieldAddr{},
		closures: map[*ssa.Function][]*ssa.MakeClosure{}, escapes: map[*ssa.Global][]*ssa.Function{}}
	var ops []*ssa.Value
	for f := range funcs {
		for _, b := range f.Blocks {
			for _, in := range b.Instrs {
				switch in := in.(type) {
				case *ssa.Store:
					x.stores[in.Addr] = append(x.stores[in.Addr], in)
					if g, ok := in.Val.(*ssa.Global); ok {
						x.escapes[g] = append(x.escapes[g], f)
					}
					continue
				case *ssa.FieldAddr:
					if g, ok := in.X.(*ssa.Global); ok {
						x.fieldAddrs[g] = append(x.fieldAddrs[g], in)
					}
					continue
				case *ssa.UnOp, *ssa.DebugRef:
					continue
				case *ssa.MakeClosure:
					fn := in.Fn.(*ssa.Function)
					x.closures[fn] = append(x.closures[fn], in)
				}
				ops = in.Operands(ops[:0])
				for _, op := range ops {
					if g, ok := (*op).(*ssa.Global); ok {
						x.escapes[g] = append(x.escapes[g], f)
					}
				}
			}
		}
	}
	return x
}

// walk is a breadth-first walk of the graph from the roots: each function
// reached with the call that first reached it, so that a path is a
// shortest one.
type walk struct {
	reached map[*ssa.Function]bool
	parent  map[*ssa.Function]*ssa.Function
	// ops are the SDK calls met, each with the function calling it.
	ops []sdkCall
	met map[string]bool
}

type sdkCall struct {
	caller *ssa.Function
	call   string
}

func (a *analysis) walk() walk {
	w := walk{reached: map[*ssa.Function]bool{}, parent: map[*ssa.Function]*ssa.Function{}, met: map[string]bool{}}
	queue := slices.Clone(a.roots)
	for _, r := range a.roots {
		w.reached[r] = true
	}
	seenOp := map[sdkCall]bool{}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, callee := range a.callees(f) {
			if call, ok := sdkOperation(callee); ok {
				k := sdkCall{f, call}
				if !seenOp[k] {
					seenOp[k] = true
					w.ops = append(w.ops, k)
				}
				continue
			}
			if w.reached[callee] {
				continue
			}
			if a.standIns[callee.String()] {
				w.met[callee.String()] = true
				continue
			}
			if a.local != "" && callee.Pkg != nil && strings.HasPrefix(callee.Pkg.Pkg.Path(), a.local) {
				continue
			}
			w.reached[callee] = true
			w.parent[callee] = f
			queue = append(queue, callee)
		}
		// A DynamoDB transaction's items are authorised by their parts:
		// the function that builds one makes the call need its action.
		for _, part := range transactParts(f) {
			k := sdkCall{f, "dynamodb.TransactWriteItems (" + part + ")"}
			if !seenOp[k] {
				seenOp[k] = true
				w.ops = append(w.ops, k)
			}
		}
	}
	return w
}

// callees are f's callees, in a deterministic order: its call sites in
// order, each site's callees by name.
func (a *analysis) callees(f *ssa.Function) []*ssa.Function {
	n := a.graph.Nodes[f]
	bySite := map[ssa.CallInstruction][]*ssa.Function{}
	if n != nil {
		for _, e := range n.Out {
			if e.Site != nil {
				bySite[e.Site] = append(bySite[e.Site], e.Callee.Func)
			}
		}
	}
	var out []*ssa.Function
	for _, b := range f.Blocks {
		for _, in := range b.Instrs {
			site, ok := in.(ssa.CallInstruction)
			if !ok {
				continue
			}
			cs := bySite[site]
			common := site.Common()
			switch st := common.StaticCallee(); {
			case st != nil && st.Pkg != nil && st.Pkg.Pkg.Path() == lambdaStart && strings.HasPrefix(st.Name(), "Start") && len(common.Args) > 0:
				// The handler, called by reflection.
				cs = append(cs, a.handlers(common.Args[0])...)
			case st != nil:
				if !slices.Contains(cs, st) {
					cs = append(cs, st)
				}
			case !common.IsInvoke() && len(cs) > 1:
				if traced, ok := a.resolve(common.Value); ok {
					cs = slices.DeleteFunc(cs, func(c *ssa.Function) bool { return !slices.Contains(traced, c) })
				}
			}
			if len(cs) > 1 {
				sort.Slice(cs, func(i, j int) bool { return cs[i].String() < cs[j].String() })
				cs = slices.Compact(cs)
			}
			out = append(out, cs...)
		}
	}
	return out
}

// handlers are the functions the value handed to lambda.Start can hold:
// traced, or, when the trace is incomplete, every address-taken function
// of its type.
func (a *analysis) handlers(v ssa.Value) []*ssa.Function {
	if fs, ok := a.resolve(v); ok {
		return fs
	}
	mi, ok := v.(*ssa.MakeInterface)
	if !ok {
		return nil
	}
	sig, ok := mi.X.Type().Underlying().(*types.Signature)
	if !ok {
		return nil
	}
	var out []*ssa.Function
	for _, f := range a.addrTaken {
		if types.Identical(f.Signature, sig) {
			out = append(out, f)
		}
	}
	return out
}

// resolve traces v back to the functions it can hold; ok is false when the
// trace meets something it does not follow (a map, a slice, a channel, an
// escaping address, an external function) or runs out of budget.
func (a *analysis) resolve(v ssa.Value) ([]*ssa.Function, bool) {
	a.budget = 4000
	set := map[*ssa.Function]bool{}
	ok := a.trace(v, nil, set, map[string]bool{})
	if !ok {
		return nil, false
	}
	out := make([]*ssa.Function, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, true
}

// trace adds to set the functions v's field path fields (outermost
// first) can hold.
func (a *analysis) trace(v ssa.Value, fields []int, set map[*ssa.Function]bool, seen map[string]bool) bool {
	a.budget--
	if a.budget < 0 {
		return false
	}
	key := fmt.Sprintf("%p%v", v, fields)
	if seen[key] {
		return true // its values are added where it was first met
	}
	seen[key] = true
	switch v := v.(type) {
	case *ssa.Function:
		if len(fields) == 0 {
			set[v] = true
		}
		return true
	case *ssa.MakeClosure:
		if len(fields) == 0 {
			set[v.Fn.(*ssa.Function)] = true
		}
		return true
	case *ssa.Const:
		return true // nil
	case *ssa.MakeInterface:
		return a.trace(v.X, fields, set, seen)
	case *ssa.ChangeType:
		return a.trace(v.X, fields, set, seen)
	case *ssa.Field:
		return a.trace(v.X, append([]int{v.Field}, fields...), set, seen)
	case *ssa.UnOp:
		if v.Op == token.MUL {
			return a.traceAddr(v.X, fields, set, seen)
		}
		return false
	case *ssa.Phi:
		for _, e := range v.Edges {
			if !a.trace(e, fields, set, seen) {
				return false
			}
		}
		return true
	case *ssa.Extract:
		if call, ok := v.Tuple.(*ssa.Call); ok {
			return a.traceResult(call, v.Index, fields, set, seen)
		}
		return false
	case *ssa.Call:
		return a.traceResult(v, 0, fields, set, seen)
	case *ssa.Parameter:
		return a.traceParam(v, fields, set, seen)
	case *ssa.FreeVar:
		f := v.Parent()
		i := slices.Index(f.FreeVars, v)
		for _, mc := range a.closures[f] {
			if !a.reached[mc.Parent()] {
				continue
			}
			if !a.trace(mc.Bindings[i], fields, set, seen) {
				return false
			}
		}
		return true
	}
	return false
}

// traceAddr traces what is loaded from addr.
func (a *analysis) traceAddr(addr ssa.Value, fields []int, set map[*ssa.Function]bool, seen map[string]bool) bool {
	switch addr := addr.(type) {
	case *ssa.FieldAddr:
		return a.traceAddr(addr.X, append([]int{addr.Field}, fields...), set, seen)
	case *ssa.Global:
		for _, f := range a.escapes[addr] {
			if a.reached[f] {
				return false
			}
		}
		return a.traceStores(addr, fields, set, seen)
	case *ssa.Alloc:
		if !a.localOnly(addr) {
			return false
		}
		return a.traceStores(addr, fields, set, seen)
	}
	return false
}

// traceStores traces the values stored to addr and to its fields.
func (a *analysis) traceStores(addr ssa.Value, fields []int, set map[*ssa.Function]bool, seen map[string]bool) bool {
	for _, st := range a.stores[addr] {
		if !a.reached[st.Parent()] {
			continue
		}
		if !a.trace(st.Val, fields, set, seen) {
			return false
		}
	}
	if len(fields) == 0 {
		return true
	}
	var fas []*ssa.FieldAddr
	if g, ok := addr.(*ssa.Global); ok {
		fas = a.fieldAddrs[g] // a global has no referrers
	} else {
		for _, r := range *addr.Referrers() {
			if fa, ok := r.(*ssa.FieldAddr); ok {
				fas = append(fas, fa)
			}
		}
	}
	for _, fa := range fas {
		if !a.reached[fa.Parent()] {
			continue
		}
		if fa.Field == fields[0] && !a.traceStores(fa, fields[1:], set, seen) {
			return false
		}
	}
	return true
}

// localOnly reports whether an Alloc's address (and its fields') is only
// stored to and loaded from.
func (a *analysis) localOnly(v ssa.Value) bool {
	for _, r := range *v.Referrers() {
		switch r := r.(type) {
		case *ssa.Store:
			if r.Val == v {
				return false
			}
		case *ssa.UnOp, *ssa.DebugRef:
		case *ssa.FieldAddr:
			if !a.localOnly(r) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// traceResult traces result index of the functions call can call.
func (a *analysis) traceResult(call *ssa.Call, index int, fields []int, set map[*ssa.Function]bool, seen map[string]bool) bool {
	common := call.Common()
	var callees []*ssa.Function
	if st := common.StaticCallee(); st != nil {
		callees = []*ssa.Function{st}
	} else if common.IsInvoke() {
		return false
	} else {
		fs, ok := a.subResolve(common.Value)
		if !ok {
			return false
		}
		callees = fs
	}
	for _, f := range callees {
		if len(f.Blocks) == 0 {
			return false
		}
		for _, b := range f.Blocks {
			if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok {
				if !a.trace(ret.Results[index], fields, set, seen) {
					return false
				}
			}
		}
	}
	return true
}

func (a *analysis) subResolve(v ssa.Value) ([]*ssa.Function, bool) {
	set := map[*ssa.Function]bool{}
	if !a.trace(v, nil, set, map[string]bool{}) {
		return nil, false
	}
	out := make([]*ssa.Function, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	return out, true
}

// traceParam traces the arguments every call of p's function passes it.
func (a *analysis) traceParam(p *ssa.Parameter, fields []int, set map[*ssa.Function]bool, seen map[string]bool) bool {
	f := p.Parent()
	i := slices.Index(f.Params, p)
	n := a.graph.Nodes[f]
	if n == nil {
		return true
	}
	for _, e := range n.In {
		if e.Site == nil || !a.reached[e.Caller.Func] {
			continue
		}
		common := e.Site.Common()
		args := common.Args
		if common.IsInvoke() {
			if i == 0 {
				return false // the receiver of an interface call
			}
			args = append([]ssa.Value{nil}, args...)
		}
		if i >= len(args) {
			return false
		}
		if !a.trace(args[i], fields, set, seen) {
			return false
		}
	}
	return true
}

// sdkOperation reports whether f is an SDK operation: an exported method
// of a service package's *Client or *PresignClient, or a paginator's
// NextPage (its operation's name: "dynamodb.Query").
func sdkOperation(f *ssa.Function) (string, bool) {
	recv := f.Signature.Recv()
	if recv == nil || f.Object() == nil || !f.Object().Exported() {
		return "", false
	}
	ptr, ok := recv.Type().(*types.Pointer)
	if !ok {
		return "", false
	}
	named, ok := ptr.Elem().(*types.Named)
	if !ok || named.Obj().Pkg() == nil || !strings.HasPrefix(named.Obj().Pkg().Path(), sdkServices) {
		return "", false
	}
	pkg, typ := named.Obj().Pkg(), named.Obj().Name()
	if strings.Contains(strings.TrimPrefix(pkg.Path(), sdkServices), "/") {
		return "", false // service/<name>/types and the like
	}
	switch {
	case typ == "Client" && f.Name() != "Options":
		return pkg.Name() + "." + f.Name(), true
	case typ == "PresignClient" && strings.HasPrefix(f.Name(), "Presign"):
		return pkg.Name() + "." + f.Name(), true
	case strings.HasSuffix(typ, "Paginator") && f.Name() == "NextPage":
		return pkg.Name() + "." + strings.TrimSuffix(typ, "Paginator"), true
	}
	return "", false
}

// transactParts are the parts of DynamoDB TransactWriteItem values f sets
// (Put, Update, Delete, ConditionCheck).
func transactParts(f *ssa.Function) []string {
	var parts []string
	for _, b := range f.Blocks {
		for _, in := range b.Instrs {
			fa, ok := in.(*ssa.FieldAddr)
			if !ok {
				continue
			}
			st, ok := fa.X.Type().Underlying().(*types.Pointer)
			if !ok {
				continue
			}
			named, ok := st.Elem().(*types.Named)
			if !ok || named.Obj().Name() != "TransactWriteItem" || named.Obj().Pkg() == nil ||
				named.Obj().Pkg().Path() != sdkServices+"dynamodb/types" {
				continue
			}
			name := named.Underlying().(*types.Struct).Field(fa.Field).Name()
			if !slices.Contains(parts, name) {
				parts = append(parts, name)
			}
		}
	}
	sort.Strings(parts)
	return parts
}

// operations are the walk's SDK calls, one per call name with the
// shortest path, sorted.
func (w walk) operations(fn string) []Operation {
	best := map[string][]string{}
	for _, c := range w.ops {
		p := w.path(c.caller)
		name := c.call
		if i := strings.Index(name, " ("); i > 0 {
			// A transaction's part is set where the item is built.
			name = name[:i]
		}
		p = append(p, name)
		if old, ok := best[c.call]; !ok || len(p) < len(old) || (len(p) == len(old) && strings.Join(p, " ") < strings.Join(old, " ")) {
			best[c.call] = p
		}
	}
	var out []Operation
	for call, p := range best {
		out = append(out, Operation{Function: fn, Call: call, Actions: OperationActions(call), Path: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

func (w walk) path(f *ssa.Function) []string {
	var p []string
	for ; f != nil; f = w.parent[f] {
		p = append(p, shortName(f))
	}
	slices.Reverse(p)
	return p
}

func (w walk) standIns() []string {
	var out []string
	for s := range w.met {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// shortName is f's name without the module's path: "store.(*Store).PutJob",
// "handler.NewAdminWith$1".
func shortName(f *ssa.Function) string {
	s := f.String()
	if f.Pkg != nil {
		p := f.Pkg.Pkg.Path()
		s = strings.ReplaceAll(s, p+".", path.Base(p)+".")
	}
	return strings.ReplaceAll(s, "github.com/conveyor/conveyor/", "")
}
