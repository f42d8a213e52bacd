package handover

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/migration"
)

// v1ConfigSince is the first release that reads controllermanager.config.k8s.io/v1.
var v1ConfigSince = version.MustParseGeneric("v1.24.0")

// migrationFile renders a LeaderMigrationConfiguration in which component runs names.
// legacyAPI writes v1beta1, which releases before v1.24 need.
func migrationFile(leaderName, component string, names []string, legacyAPI bool) string {
	var b strings.Builder
	if legacyAPI {
		b.WriteString("apiVersion: " + migration.Group + "/v1beta1\nkind: " + migration.Kind + "\nleaderName: " + leaderName + "\nresourceLock: leases\n")
	} else {
		b.WriteString("apiVersion: " + migration.Group + "/v1\nkind: " + migration.Kind + "\nleaderName: " + leaderName + "\n")
	}
	b.WriteString("controllerLeaders:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    component: %s\n", n, component)
	}
	return b.String()
}

// files are the two configurations of a move: the old component's, in its own
// spelling, and nephele's. Both are checked the way nephele reads them: nephele's must
// migrate exactly the moving controllers.
func (b *builder) files() (old, neph File, err error) {
	// Every controller that moves is guarded by the migration lease on nephele's side,
	// except one the old component never ran: kube-controller-manager had no
	// cloud-node-controller, so nephele runs it under its own lease from the start.
	var oldNames, moving []string
	for _, m := range b.moving {
		if m.Old != "" {
			oldNames = append(oldNames, m.Old)
			moving = append(moving, m.Nephele)
		}
	}
	legacy := false
	if v, perr := version.ParseGeneric(b.old.version); perr == nil {
		legacy = v.LessThan(v1ConfigSince)
	}
	oldComponent := string(b.old.kind)
	old = File{Path: path.Join(b.t.ConfigDir, "leader-migration-"+oldComponent+".yaml"),
		Content: migrationFile(b.t.MigrationLease, oldComponent, oldNames, legacy)}
	neph = File{Path: path.Join(b.t.ConfigDir, "leader-migration-nephele.yaml"),
		Content: migrationFile(b.t.MigrationLease, manager.Component, moving, false)}

	for _, f := range []File{old, neph} {
		if _, perr := migration.Parse([]byte(f.Content)); perr != nil {
			return File{}, File{}, fmt.Errorf("the runbook's own %s does not parse: %w", f.Path, perr)
		}
	}
	cfg, _ := migration.Parse([]byte(neph.Content))
	var all []string
	for _, s := range b.t.Specs {
		all = append(all, s.Name)
	}
	plan, err := cfg.Classify(manager.Component, all, func(name string) (string, bool) { return manager.CanonicalName(b.t.Specs, name) })
	if err != nil {
		return File{}, File{}, fmt.Errorf("nephele would refuse the runbook's %s: %w", neph.Path, err)
	}
	if !slices.Equal(plan.Migrated, moving) {
		return File{}, File{}, fmt.Errorf("nephele would migrate %v with the runbook's %s, want %v", plan.Migrated, neph.Path, moving)
	}
	// nephele reads the old side's file the same way: one file could serve both.
	oldCfg, _ := migration.Parse([]byte(old.Content))
	if oldCfg != nil {
		if p, err := oldCfg.Classify(oldComponent, all, func(name string) (string, bool) { return manager.CanonicalName(b.t.Specs, name) }); err != nil || !slices.Equal(p.Migrated, moving) {
			return File{}, File{}, fmt.Errorf("the runbook's %s names %v, which nephele reads as %v (%v), want %v", old.Path, oldNames, p.Migrated, err, moving)
		}
	}
	return old, neph, nil
}

// commands are the nephele migrate commands the checks point at, with the flags this
// move needs.
func (b *builder) statusCommand() string {
	return "nephele migrate status" + b.leaseFlags(false)
}

func (b *builder) checkCommand(from Source) string {
	cmd := "nephele migrate check --from " + string(from) + b.leaseFlags(true)
	if b.t.Provider != "" {
		cmd += " --provider " + b.t.Provider
	}
	return cmd
}

func (b *builder) leaseFlags(withOld bool) string {
	var f string
	if b.s.Namespace != DefaultNamespace {
		f += " --namespace " + b.s.Namespace
	}
	if b.t.Lease != manager.NewOptions().LeaderElectResourceName {
		f += " --lease " + b.t.Lease
	}
	if b.t.MigrationLease != migration.DefaultLeaderName {
		f += " --migration-lease " + b.t.MigrationLease
	}
	def := KubeControllerManagerLease
	if b.old.kind == CloudControllerManager {
		def = manager.NewOptions().LeaderElectResourceName
	}
	if withOld && b.old.lease != def {
		f += " --from-lease " + b.old.lease
	}
	return f
}

// nephele names nephele's deployment in changes.
func (b *builder) nephele() string {
	for _, c := range b.s.ComponentsOf(CloudControllerManager) {
		if c.Nephele {
			return "nephele's cloud-controller-manager (" + c.Workload + ")"
		}
	}
	return "nephele's cloud-controller-manager (its Deployment: `nephele manifests`)"
}

// nepheleFlags are the flags nephele needs beside leader migration to take over where
// the old component stands: the same cluster name (load balancer and route names
// depend on it), cluster CIDR, routes and lease timings.
func (b *builder) nepheleFlags() []string {
	provider := b.t.Provider
	if provider == "" {
		provider = "<provider>"
	}
	flags := []string{"--cloud-provider=" + provider, "--cloud-config=<the provider's config file>"}
	if b.t.Lease != manager.NewOptions().LeaderElectResourceName {
		flags = append(flags, "--leader-elect-resource-name="+b.t.Lease)
	}
	for _, name := range []string{"cluster-name", "cluster-cidr", "configure-cloud-routes",
		"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"} {
		if v, ok := b.old.args[name]; ok {
			flags = append(flags, "--"+name+"="+v)
		}
	}
	if b.old.kind == CloudControllerManager {
		if v, ok := b.old.args["controllers"]; ok {
			flags = append(flags, "--controllers="+v)
		}
	}
	return flags
}

func migrationFlags(f File) []string {
	return []string{"--enable-leader-migration", "--leader-migration-config=" + f.Path}
}

// takeover is the bound on a takeover after a holder stops without releasing its
// lease, in the lease timings the old component uses.
func (b *builder) takeover() string {
	ld, rp := b.old.flag("leader-elect-lease-duration", "15s"), b.old.flag("leader-elect-retry-period", "2s")
	return fmt.Sprintf("lease duration + 2 × 2.2 × retry period (%s and %s here)", ld, rp)
}

func (b *builder) steps(move Move) ([]Step, error) {
	oldFile, nephFile, err := b.files()
	if err != nil {
		return nil, err
	}
	switch {
	case move.From == FromKubeControllerManager && !move.Rollback:
		return b.fromKCM(oldFile, nephFile), nil
	case move.From == FromKubeControllerManager:
		return b.backToKCM(oldFile, nephFile), nil
	case !move.Rollback:
		return b.fromCCM(oldFile, nephFile), nil
	default:
		return b.backToCCM(oldFile, nephFile), nil
	}
}

func (b *builder) lease(name string) string { return b.s.Namespace + "/" + name }

// apiservers names the kube-apiserver instances for a Change.
func (b *builder) apiservers() string {
	var ws []string
	for _, c := range b.s.ComponentsOf(KubeAPIServer) {
		ws = append(ws, c.Workload)
	}
	if len(ws) == 0 {
		return "kube-apiserver (every instance)"
	}
	return "kube-apiserver (" + strings.Join(ws, ", ") + ")"
}

func (b *builder) migratedNames(side func(MovingController) string) string {
	var names []string
	for _, m := range b.moving {
		if m.Old != "" {
			names = append(names, side(m))
		}
	}
	return strings.Join(names, ", ")
}

func oldName(m MovingController) string  { return m.Old }
func nephName(m MovingController) string { return m.Nephele }

func (b *builder) fromKCM(kcmFile, nephFile File) []Step {
	kcm, ml, nl := b.old.where(), b.lease(b.t.MigrationLease), b.lease(b.t.Lease)
	kcmLease := b.lease(b.old.lease)
	apiservers := b.apiservers()
	var apiRemove []string
	for _, c := range b.s.ComponentsOf(KubeAPIServer) {
		for _, f := range []string{"cloud-provider", "cloud-config"} {
			if v, ok := c.Args.Get(f); ok {
				apiRemove = append(apiRemove, "--"+f+"="+v)
			}
		}
	}
	if len(b.s.ComponentsOf(KubeAPIServer)) == 0 {
		apiRemove = []string{"--cloud-provider", "--cloud-config (if set)"}
	}
	cloudConfig := b.old.flag("cloud-config", "")
	kcmRemove := []string{"--cloud-provider=" + b.t.InTreeProvider}
	if cloudConfig != "" {
		kcmRemove = append(kcmRemove, "--cloud-config="+cloudConfig)
	}
	kcmRemove = append(kcmRemove, migrationFlags(kcmFile)...)
	kubeletRemove := []string{"--cloud-provider=" + b.t.InTreeProvider, "--cloud-config (if set)"}

	return []Step{
		{
			Title: "Guard kube-controller-manager's cloud controllers with the migration lease",
			Why: fmt.Sprintf("kube-controller-manager goes on running %s, but only while it holds %s. "+
				"Keep --cloud-provider=%s. Roll it out one control-plane node at a time, as any flag change.",
				b.migratedNames(oldName), ml, b.t.InTreeProvider),
			Changes: []Change{{Component: kcm, Add: migrationFlags(kcmFile),
				Do: []string{"put " + kcmFile.Path + " on every control-plane node (or mount it from a ConfigMap)"}}},
			Files: []File{kcmFile},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held by the holder of %s (kube-controller-manager)", ml, kcmLease)},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Deploy nephele's cloud-controller-manager with leader migration",
			Why: fmt.Sprintf("nephele leads on %s and runs what kube-controller-manager never ran (cloud-node-controller: "+
				"it initializes Nodes registered with the uninitialized taint, and none are while kubelets run the in-tree provider); "+
				"it campaigns for %s and waits: kube-controller-manager holds it.", nl, ml),
			Changes: []Change{{Component: b.nephele(), Add: append(b.nepheleFlags(), migrationFlags(nephFile)...),
				Do: []string{"mount " + nephFile.Path + " from a ConfigMap"}}},
			Files: []File{nephFile},
			Check: Expectation{
				Expect: []string{
					fmt.Sprintf("lease %s is held (nephele)", nl),
					fmt.Sprintf("lease %s is still held by the holder of %s", ml, kcmLease),
					fmt.Sprintf("nephele runs only cloud-node-controller; %s stay with kube-controller-manager", b.migratedNames(nephName)),
				},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Take the cloud provider out of kube-controller-manager and kube-apiserver",
			Why: fmt.Sprintf("With --cloud-provider=external, kube-controller-manager runs no cloud controller and needs no migration lease. "+
				"Roll it out one control-plane node at a time: while one instance still has the in-tree provider it may hold %s; "+
				"when the last stops, nephele takes the lease over and starts %s. "+
				"kube-controller-manager does not release the lease on exit, so this takes up to %s; nothing runs the migrated controllers meanwhile, and nothing runs them twice.",
				ml, b.migratedNames(nephName), b.takeover()),
			Changes: []Change{
				{Component: kcm, Add: []string{"--cloud-provider=external"}, Remove: kcmRemove,
					Do: []string{"keep --allocate-node-cidrs and --cluster-cidr: node IPAM stays in kube-controller-manager"}},
				{Component: apiservers, Remove: apiRemove},
			},
			Check: Expectation{
				Expect: []string{
					fmt.Sprintf("lease %s is held by the holder of %s (nephele)", ml, nl),
					"nephele runs every cloud controller",
				},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Switch the kubelets to the external cloud provider",
			Why: "One node at a time. A kubelet with --cloud-provider=external no longer asks the cloud for its addresses; nephele's " +
				"cloud-node-controller keeps them, and initializes any Node that registers anew (it carries the uninitialized taint until then).",
			Changes: []Change{{Component: "kubelet (every node)", Add: []string{"--cloud-provider=external"}, Remove: kubeletRemove}},
			Check: Expectation{
				Expect:   []string{"every Node keeps its provider ID; none stays uninitialized"},
				Commands: []string{b.checkCommand(FromKubeControllerManager)},
			},
		},
		{
			Title: "Run nephele without leader migration",
			Why: "Nothing else campaigns for the migration lease now. Each nephele replica restarted without the flags runs every controller " +
				"under its main lease; a stopping replica releases its leases, so the next takes over within a retry period.",
			Changes: []Change{{Component: b.nephele(), Remove: migrationFlags(nephFile),
				Do: []string{"kubectl -n " + b.s.Namespace + " delete lease " + b.t.MigrationLease + " (once no replica uses it)"}}},
			Check: Expectation{
				Expect:   []string{"every check passes"},
				Commands: []string{b.checkCommand(FromKubeControllerManager)},
			},
		},
	}
}

func (b *builder) backToKCM(kcmFile, nephFile File) []Step {
	kcm, ml, nl := b.old.where(), b.lease(b.t.MigrationLease), b.lease(b.t.Lease)
	kcmLease := b.lease(b.old.lease)
	return []Step{
		b.nepheleWithMigration(nephFile),
		{
			Title:   "Switch the kubelets back to the in-tree cloud provider",
			Why:     "One node at a time. nephele's cloud-node-controller goes on running until the last step; a kubelet with the in-tree provider sets its own addresses.",
			Changes: []Change{{Component: "kubelet (every node)", Add: []string{"--cloud-provider=" + b.t.InTreeProvider, "--cloud-config=<the provider's config file>"}, Remove: []string{"--cloud-provider=external"}}},
			Check: Expectation{
				Expect:   []string{"every Node keeps its provider ID"},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Give kube-controller-manager its cloud provider back, under the migration lease",
			Why: fmt.Sprintf("kube-controller-manager campaigns for %s, which nephele holds: it waits, and runs none of %s yet.",
				ml, b.migratedNames(oldName)),
			Changes: []Change{
				{Component: kcm, Add: append([]string{"--cloud-provider=" + b.t.InTreeProvider, "--cloud-config=<the provider's config file>"}, migrationFlags(kcmFile)...),
					Remove: []string{"--cloud-provider=external"}, Do: []string{"put " + kcmFile.Path + " on every control-plane node"}},
				{Component: b.apiservers(), Do: []string{"give back the --cloud-provider and --cloud-config it had, if any"}},
			},
			Files: []File{kcmFile},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held (kube-controller-manager); lease %s is still held by the holder of %s (nephele)", kcmLease, ml, nl)},
				Commands: []string{b.statusCommand()},
			},
		},
		b.stopNephele(kcmLease),
		{
			Title:   "Run kube-controller-manager without leader migration",
			Why:     "One control-plane node at a time; its instances hand over through their main lease, as on any rollout.",
			Changes: []Change{{Component: kcm, Remove: migrationFlags(kcmFile), Do: []string{"kubectl -n " + b.s.Namespace + " delete lease " + b.t.MigrationLease + " (once no instance uses it)"}}},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held; lease %s is stale or gone", kcmLease, ml)},
				Commands: []string{b.statusCommand()},
			},
		},
	}
}

func (b *builder) fromCCM(ccmFile, nephFile File) []Step {
	ccm, ml, nl, ol := b.old.where(), b.lease(b.t.MigrationLease), b.lease(b.t.Lease), b.lease(b.old.lease)
	return []Step{
		{
			Title: "Guard the old cloud-controller-manager's controllers with the migration lease",
			Why: fmt.Sprintf("It goes on running %s, but only while it holds %s, which it takes right after its main lease %s. "+
				"Its replicas roll out as on any change: a new one leads only once the old one's main lease is gone, so none overlap.",
				b.migratedNames(oldName), ml, ol),
			Changes: []Change{{Component: ccm, Add: migrationFlags(ccmFile), Do: []string{"mount " + ccmFile.Path + " from a ConfigMap"}}},
			Files:   []File{ccmFile},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held by the holder of %s (the old cloud-controller-manager)", ml, ol)},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Deploy nephele's cloud-controller-manager with leader migration",
			Why: fmt.Sprintf("nephele leads on a lease of its own, %s, under which it runs nothing: every cloud controller is listed in the "+
				"migration config, so it waits for %s, which the old cloud-controller-manager holds.", nl, ml),
			Changes: []Change{{Component: b.nephele(), Add: append(b.nepheleFlags(), migrationFlags(nephFile)...),
				Do: []string{"mount " + nephFile.Path + " from a ConfigMap"}}},
			Files: []File{nephFile},
			Check: Expectation{
				Expect: []string{
					fmt.Sprintf("lease %s is held (nephele), by another holder than %s", nl, ol),
					fmt.Sprintf("lease %s is still held by the holder of %s", ml, ol),
				},
				Commands: []string{b.statusCommand()},
			},
		},
		{
			Title: "Stop the old cloud-controller-manager",
			Why: fmt.Sprintf("nephele takes %s over once it expires and starts %s. A cloud-controller-manager built on k8s.io/cloud-provider "+
				"does not release its leases when it stops, so this takes up to %s; nothing runs the controllers meanwhile, and nothing runs them twice.",
				ml, b.migratedNames(nephName), b.takeover()),
			Changes: []Change{{Component: ccm, Do: []string{"scale it to zero replicas (keep it, for a rollback)"}}},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held by the holder of %s (nephele); lease %s is stale", ml, nl, ol)},
				Commands: []string{b.statusCommand(), b.checkCommand(FromCloudControllerManager)},
			},
		},
		{
			Title: "Run nephele without leader migration",
			Why: "Each nephele replica restarted without the flags runs every controller under its main lease; " +
				"a stopping replica releases its leases, so the next takes over within a retry period.",
			Changes: []Change{
				{Component: b.nephele(), Remove: migrationFlags(nephFile)},
				{Component: ccm, Do: []string{"delete it, its RBAC and " + ccmFile.Path + "'s ConfigMap once no rollback is wanted",
					"kubectl -n " + b.s.Namespace + " delete lease " + b.t.MigrationLease + " " + b.old.lease}},
			},
			Check: Expectation{
				Expect:   []string{"every check passes"},
				Commands: []string{b.checkCommand(FromCloudControllerManager)},
			},
		},
	}
}

func (b *builder) backToCCM(ccmFile, nephFile File) []Step {
	ccm, ml, nl, ol := b.old.where(), b.lease(b.t.MigrationLease), b.lease(b.t.Lease), b.lease(b.old.lease)
	return []Step{
		b.nepheleWithMigration(nephFile),
		{
			Title:   "Start the old cloud-controller-manager with leader migration",
			Why:     fmt.Sprintf("It leads on %s and waits for %s, which nephele holds.", ol, ml),
			Changes: []Change{{Component: ccm, Add: migrationFlags(ccmFile), Do: []string{"mount " + ccmFile.Path + " from a ConfigMap", "scale it back up"}}},
			Files:   []File{ccmFile},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held; lease %s is still held by the holder of %s (nephele)", ol, ml, nl)},
				Commands: []string{b.statusCommand()},
			},
		},
		b.stopNephele(ol),
		{
			Title:   "Run the old cloud-controller-manager without leader migration",
			Why:     "Its replicas hand over through their main lease, as on any rollout.",
			Changes: []Change{{Component: ccm, Remove: migrationFlags(ccmFile), Do: []string{"kubectl -n " + b.s.Namespace + " delete lease " + b.t.MigrationLease + " (once no replica uses it)"}}},
			Check: Expectation{
				Expect:   []string{fmt.Sprintf("lease %s is held; lease %s is stale or gone", ol, ml)},
				Commands: []string{b.statusCommand()},
			},
		},
	}
}

// nepheleWithMigration is the first step back: nephele guards the moving controllers
// with the migration lease again, which nobody else holds.
func (b *builder) nepheleWithMigration(nephFile File) Step {
	ml, nl := b.lease(b.t.MigrationLease), b.lease(b.t.Lease)
	return Step{
		Title:   "Run nephele with leader migration",
		Why:     fmt.Sprintf("nephele runs %s only while it holds %s, which it takes at once: nobody else campaigns for it.", b.migratedNames(nephName), ml),
		Changes: []Change{{Component: b.nephele(), Add: migrationFlags(nephFile), Do: []string{"mount " + nephFile.Path + " from a ConfigMap"}}},
		Files:   []File{nephFile},
		Check: Expectation{
			Expect:   []string{fmt.Sprintf("lease %s is held by the holder of %s (nephele)", ml, nl)},
			Commands: []string{b.statusCommand()},
		},
	}
}

// stopNephele hands the migration lease back to the old component, whose main lease is
// oldLease.
func (b *builder) stopNephele(oldLease string) Step {
	ml, nl := b.lease(b.t.MigrationLease), b.lease(b.t.Lease)
	return Step{
		Title: "Stop nephele",
		Why: fmt.Sprintf("nephele releases %s when it stops, so %s takes it over at its next try (within 2.2 retry periods) and starts %s.",
			ml, b.oldComponent(), b.migratedNames(oldName)),
		Changes: []Change{{Component: b.nephele(), Do: []string{"scale it to zero replicas, or delete it"}}},
		Check: Expectation{
			Expect:   []string{fmt.Sprintf("lease %s is held by the holder of %s (%s); lease %s is released or stale", ml, oldLease, b.oldComponent(), nl)},
			Commands: []string{b.statusCommand()},
		},
	}
}

// oldComponent names the component the controllers move from in prose.
func (b *builder) oldComponent() string {
	if b.old.kind == CloudControllerManager {
		return "the old cloud-controller-manager"
	}
	return string(b.old.kind)
}
