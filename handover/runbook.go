package handover

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/migration"
)

// Source is the component the cloud controllers move from (or, rolling back, to).
type Source string

// The components a move can start from.
const (
	FromKubeControllerManager  Source = Source(KubeControllerManager)
	FromCloudControllerManager Source = Source(CloudControllerManager)
)

// Well-known lease names.
const (
	// KubeControllerManagerLease is kube-controller-manager's main lease.
	KubeControllerManagerLease = "kube-controller-manager"
	// SeparateLease is the main lease the runbook gives nephele when the
	// cloud-controller-manager it replaces uses the default one: during the move both
	// run, and each must lead on a lease of its own.
	SeparateLease = "nephele-cloud-controller-manager"
)

// ErrNothingToMove is wrapped by DetectSource's error when no component but nephele runs
// cloud controllers: there is nothing to hand over.
var ErrNothingToMove = errors.New("nothing to move")

// Target is nephele's side of a move.
type Target struct {
	// Provider is nephele's --cloud-provider; Nodes' provider IDs must use its scheme.
	// Empty skips that check.
	Provider string
	// Lease is nephele's main lease (--leader-elect-resource-name). Empty means the
	// default, cloud-controller-manager, unless the cloud-controller-manager being
	// replaced holds that one: then SeparateLease.
	Lease string
	// MigrationLease is the migration lease's name; empty means upstream's default,
	// cloud-provider-extraction-migration.
	MigrationLease string
	// InTreeProvider is the in-tree provider kube-controller-manager gets back when
	// rolling back to it; read from kube-controller-manager's flags when visible.
	InTreeProvider string
	// ConfigDir is where the runbook puts the migration config files on the control
	// plane's hosts (or in a ConfigMap mounted there); /etc/kubernetes when empty.
	ConfigDir string
	// Specs are nephele's controllers (controllers.Default()): their names and aliases.
	Specs []manager.ControllerSpec
}

// Move says what a runbook moves.
type Move struct {
	From Source
	// Rollback moves the controllers back from nephele to From.
	Rollback bool
}

func (m Move) String() string {
	if m.Rollback {
		return "nephele -> " + string(m.From) + " (rollback)"
	}
	return string(m.From) + " -> nephele"
}

// Runbook is the ordered steps of one move, made from what a Snapshot shows.
type Runbook struct {
	Move Move
	// Why says how the source was chosen.
	Why string
	// Observed describes what the snapshot showed, one line each.
	Observed []string
	// Findings are what must (Blocking) or should be fixed or known first.
	Findings []Finding
	// Controllers are the controllers that change hands.
	Controllers []MovingController
	Steps       []Step
}

// Finding is one thing the survey found that matters to the move.
type Finding struct {
	// Blocking findings must be fixed before the first step.
	Blocking bool
	// Object names what it is about: "node/a", "kube-controller-manager".
	Object string
	Text   string
}

// Step is one step of a runbook: changes to make, files they need, and what to check
// before the next step.
type Step struct {
	Title string
	// Why says what the step achieves and why it is safe.
	Why     string
	Changes []Change
	Files   []File
	Check   Expectation
}

// Change is what to do to one component.
type Change struct {
	// Component names it and where it runs.
	Component string
	// Add and Remove are flags to add (or set) and to remove.
	Add, Remove []string
	// Do is anything else, one instruction a line.
	Do []string
}

// File is a file a step needs on the hosts (or mounted from a ConfigMap).
type File struct {
	Path    string
	Content string
}

// Expectation is what must hold after a step, before the next.
type Expectation struct {
	// Expect lists what must hold.
	Expect []string
	// Commands show it.
	Commands []string
}

// DetectSource says what runs the cloud controllers now, from the components the
// snapshot shows or, failing that, its leases. lease is nephele's main lease name
// ("" for the default).
func DetectSource(s *Snapshot, lease string) (Source, string, error) {
	for _, c := range s.ComponentsOf(CloudControllerManager) {
		if !c.Nephele {
			return FromCloudControllerManager, fmt.Sprintf("%s runs a cloud-controller-manager that is not nephele's (%s)", c.Workload, c.Image), nil
		}
	}
	for _, c := range s.ComponentsOf(KubeControllerManager) {
		if p, ok := c.Args.Get("cloud-provider"); ok && p != "" && p != "external" {
			return FromKubeControllerManager, fmt.Sprintf("%s runs kube-controller-manager with the in-tree cloud provider %q", c.Workload, p), nil
		}
	}
	if lease == "" {
		lease = manager.NewOptions().LeaderElectResourceName
	}
	kcms, ccms := s.ComponentsOf(KubeControllerManager), s.ComponentsOf(CloudControllerManager)
	switch {
	case len(kcms) > 0 && len(ccms) > 0:
		return "", "", fmt.Errorf("%w: kube-controller-manager runs with --cloud-provider=external and the only cloud-controller-manager is nephele's: run `nephele migrate check`", ErrNothingToMove)
	case len(kcms) > 0:
		return "", "", fmt.Errorf("%w: kube-controller-manager runs with --cloud-provider=external and no cloud-controller-manager is visible: deploy nephele's (`nephele manifests`) and run `nephele migrate check`", ErrNothingToMove)
	}
	var held []string
	ambiguous := ""
	for _, l := range s.Leases {
		if !l.Held(s.Time) || !strings.Contains(l.Name, "cloud-controller-manager") {
			continue
		}
		if l.Name == lease {
			ambiguous = l.String()
			continue
		}
		held = append(held, l.String())
	}
	if len(held) > 0 {
		return FromCloudControllerManager, fmt.Sprintf("no workload is visible, but lease %s is held", strings.Join(held, ", ")), nil
	}
	what := "no kube-controller-manager or cloud-controller-manager is visible in " + s.Namespace
	if len(s.Hidden) > 0 {
		what += " (not readable: " + strings.Join(s.Hidden, ", ") + ")"
	}
	if ambiguous != "" {
		what += "; lease " + ambiguous + " is held, by nephele or by another cloud-controller-manager"
	}
	return "", "", fmt.Errorf("cannot tell what runs the cloud controllers: %s: give --from kube-controller-manager or --from cloud-controller-manager", what)
}

// oldSide is what the runbook knows of the component the controllers move from.
type oldSide struct {
	kind    ComponentKind
	comps   []Component
	version string
	lease   string
	// args merges the visible instances' flags (the first instance that sets one wins).
	args map[string]string
}

func (o oldSide) flag(name, fallback string) string {
	if v, ok := o.args[name]; ok && v != "" {
		return v
	}
	return fallback
}

// where names the old component's instances for a Change.
func (o oldSide) where() string {
	if len(o.comps) == 0 {
		return string(o.kind) + " (every instance; none is visible in the API)"
	}
	var ws []string
	for _, c := range o.comps {
		ws = append(ws, c.Workload)
	}
	return string(o.kind) + " (" + strings.Join(ws, ", ") + ")"
}

func readOldSide(s *Snapshot, from Source) oldSide {
	o := oldSide{kind: ComponentKind(from), args: map[string]string{}}
	for _, c := range s.ComponentsOf(o.kind) {
		if c.Nephele {
			continue
		}
		o.comps = append(o.comps, c)
		if o.version == "" {
			o.version = c.Version
		}
		for _, f := range c.Args {
			if _, ok := o.args[f.Name]; !ok {
				o.args[f.Name] = f.Value
			}
		}
	}
	def := KubeControllerManagerLease
	if from == FromCloudControllerManager {
		def = manager.NewOptions().LeaderElectResourceName
	}
	o.lease = o.flag("leader-elect-resource-name", def)
	return o
}

// NewRunbook makes the runbook of a move from what s shows.
func NewRunbook(s *Snapshot, move Move, t Target) (*Runbook, error) {
	if move.From != FromKubeControllerManager && move.From != FromCloudControllerManager {
		return nil, fmt.Errorf("unknown component %q to move from: kube-controller-manager or cloud-controller-manager", move.From)
	}
	if len(t.Specs) == 0 {
		return nil, errors.New("no nephele controllers given")
	}
	old := readOldSide(s, move.From)
	t = t.complete(old)
	moving, err := movingControllers(old.kind, old.version, t.Specs, disabledByControllersFlag(old.args["controllers"], t.Specs))
	if err != nil {
		return nil, err
	}
	b := &builder{s: s, t: t, old: old, moving: moving}
	rb := &Runbook{Move: move, Controllers: moving}
	rb.Observed = b.observed()
	rb.Findings = b.findings(move)
	if rb.Steps, err = b.steps(move); err != nil {
		return nil, err
	}
	return rb, nil
}

func (t Target) complete(old oldSide) Target {
	def := manager.NewOptions().LeaderElectResourceName
	if t.Lease == "" {
		t.Lease = def
		if old.kind == CloudControllerManager && old.lease == def {
			t.Lease = SeparateLease
		}
	}
	if t.MigrationLease == "" {
		t.MigrationLease = migration.DefaultLeaderName
	}
	if t.ConfigDir == "" {
		t.ConfigDir = "/etc/kubernetes"
	}
	if t.InTreeProvider == "" {
		if p := old.args["cloud-provider"]; p != "" && p != "external" {
			t.InTreeProvider = p
		} else {
			t.InTreeProvider = "<in-tree provider>"
		}
	}
	return t
}

// builder holds what the steps are made from.
type builder struct {
	s      *Snapshot
	t      Target
	old    oldSide
	moving []MovingController
}

// observed describes the cluster as the runbook sees it.
func (b *builder) observed() []string {
	s := b.s
	var out []string
	withID, uninit := 0, 0
	schemes := map[string]int{}
	for _, n := range s.Nodes {
		if n.ProviderID != "" {
			withID++
			scheme, _, _ := strings.Cut(n.ProviderID, "://")
			schemes[scheme]++
		}
		if n.Uninitialized {
			uninit++
		}
	}
	var sch []string
	for k, v := range schemes {
		sch = append(sch, fmt.Sprintf("%s:// %d", k, v))
	}
	slices.Sort(sch)
	line := fmt.Sprintf("nodes: %d, %d with a provider ID", len(s.Nodes), withID)
	if len(sch) > 0 {
		line += " (" + strings.Join(sch, ", ") + ")"
	}
	out = append(out, fmt.Sprintf("%s, %d uninitialized", line, uninit))
	fin, addr := 0, 0
	for _, svc := range s.Services {
		if svc.Finalizer {
			fin++
		}
		if len(svc.Ingress) > 0 {
			addr++
		}
	}
	out = append(out, fmt.Sprintf("Services of type LoadBalancer: %d, %d with the cleanup finalizer, %d with an address", len(s.Services), fin, addr))
	for _, c := range s.Components {
		out = append(out, fmt.Sprintf("%s: %s, image %s%s", c.Name(), c.Workload, c.Image, flagSummary(c.Args)))
	}
	for _, l := range s.Leases {
		out = append(out, "lease "+l.String()+": "+describeLease(l, s.Time))
	}
	for _, h := range s.Hidden {
		out = append(out, "not readable: "+h)
	}
	return out
}

// summaryFlags are the flags worth showing about a component.
var summaryFlags = []string{"cloud-provider", "controllers", "leader-elect", "leader-elect-resource-name",
	"enable-leader-migration", "leader-migration-config", "configure-cloud-routes", "cluster-name"}

func flagSummary(a Args) string {
	var parts []string
	for _, name := range summaryFlags {
		if v, ok := a.Get(name); ok {
			parts = append(parts, "--"+name+"="+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, " ")
}

// describeLease says who holds l at now.
func describeLease(l Lease, now time.Time) string {
	switch {
	case l.Holder == "":
		return "released"
	case l.Held(now):
		return fmt.Sprintf("held by %s, renewed %s ago", l.Holder, age(now.Sub(l.RenewTime)))
	default:
		return fmt.Sprintf("stale, last renewed by %s %s ago (lease duration %s)", l.Holder, age(now.Sub(l.RenewTime)), l.Duration)
	}
}

// age rounds a duration for people: seconds under ten minutes, then minutes, hours.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Minute:
		return d.Round(time.Second).String()
	case d < 10*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return d.Round(time.Hour).String()
	}
}

// findings are what the move must fix or know first.
func (b *builder) findings(move Move) []Finding {
	var out []Finding
	add := func(blocking bool, object, format string, args ...any) {
		out = append(out, Finding{Blocking: blocking, Object: object, Text: fmt.Sprintf(format, args...)})
	}
	for _, h := range b.s.Hidden {
		add(false, "survey", "%s not readable: the steps name the components generically and rely on the leases", h)
	}
	for _, n := range b.s.Nodes {
		switch {
		case n.ProviderID == "":
			add(false, "node/"+n.Name, "no provider ID: nephele's controllers find a node's instance by it; a kubelet with --cloud-provider=external registering anew gets one from nephele, an existing Node keeps none")
		case b.t.Provider != "" && !strings.HasPrefix(n.ProviderID, b.t.Provider+"://"):
			add(true, "node/"+n.Name, "provider ID %s is not one of provider %s (%s://…): nephele's controllers would not find its instance; run nephele with the provider for this cloud", n.ProviderID, b.t.Provider, b.t.Provider)
		}
		if n.Uninitialized {
			add(false, "node/"+n.Name, "uninitialized since %s: no cloud-node-controller has initialized it", n.TaintedSince.UTC().Format(time.RFC3339))
		}
	}
	if len(b.s.Services) > 0 {
		add(false, "services", "%d Services of type LoadBalancer: nephele adopts their load balancers as they are (the same names, \"a\" + the Service's UID, and the same finalizer), creating and deleting none", len(b.s.Services))
	}
	old := b.old
	if !move.Rollback {
		if l, ok := b.s.Lease(old.lease); !ok || !l.Held(b.s.Time) {
			add(false, "lease "+b.s.Namespace+"/"+old.lease, "not held: %s does not seem to lead now, so nothing may be running the cloud controllers", old.kind)
		}
	}
	for _, c := range old.comps {
		if on, _ := c.Args.Get("enable-leader-migration"); on == "true" {
			if _, ok := c.Args.Get("leader-migration-config"); !ok {
				add(true, c.Workload, "--enable-leader-migration without --leader-migration-config: upstream's default config names route-controller and service-controller, which %s v1.28 and later does not match, so it would keep running them under its main lease while nephele runs them under the migration lease; give it this runbook's file", c.Kind)
			}
		}
	}
	if old.kind == KubeControllerManager && !move.Rollback && b.t.InTreeProvider == "<in-tree provider>" {
		add(false, "kube-controller-manager", "no in-tree --cloud-provider seen on it: if it runs none, it runs no cloud controller and there is nothing to hand over from it")
	}
	if b.t.Lease != manager.NewOptions().LeaderElectResourceName {
		add(false, "nephele", "nephele leads on lease %s/%s (--leader-elect-resource-name=%s), apart from the %s it replaces, which leads on %s/%s",
			b.s.Namespace, b.t.Lease, b.t.Lease, old.kind, b.s.Namespace, old.lease)
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		switch {
		case a.Blocking == b.Blocking:
			return 0
		case a.Blocking:
			return -1
		}
		return 1
	})
	return out
}

// WriteFiles writes the files of every step into dir under their base names, as a person
// following the runbook puts them in place, and returns their paths by base name.
func (r *Runbook) WriteFiles(dir string) (map[string]string, error) {
	paths := map[string]string{}
	for _, s := range r.Steps {
		for _, f := range s.Files {
			name := filepath.Base(f.Path)
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(f.Content), 0o644); err != nil {
				return nil, fmt.Errorf("writing the runbook's file %s: %w", f.Path, err)
			}
			paths[name] = path
		}
	}
	return paths, nil
}
