package handover

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/migration"
)

// Leases names the leases of a handover. Zero fields take the defaults.
type Leases struct {
	// Nephele is nephele's main lease; cloud-controller-manager by default.
	Nephele string
	// Migration is the migration lease; cloud-provider-extraction-migration by default.
	Migration string
	// Old is the main lease of the component the controllers move from:
	// kube-controller-manager's, or the old cloud-controller-manager's. Empty when not
	// known.
	Old string
}

func (l Leases) complete() Leases {
	if l.Nephele == "" {
		l.Nephele = manager.NewOptions().LeaderElectResourceName
	}
	if l.Migration == "" {
		l.Migration = migration.DefaultLeaderName
	}
	return l
}

// Status is who runs which controller, as the leases tell.
type Status struct {
	Time   time.Time
	Leases []LeaseStatus
	// Controllers are nephele's controllers and who runs them now.
	Controllers []ControllerStatus
}

// LeaseStatus is one lease and whom it belongs to.
type LeaseStatus struct {
	Lease
	// Held is whether its holder renewed it within its duration.
	Held bool
	// Role says whose lease it is: "nephele", "kube-controller-manager",
	// "cloud-controller-manager" (another one), "migration", or the lease's own name.
	Role string
	// HeldBy, for the migration lease, is the role of the lease with the same holder:
	// the component that holds it. Empty when no other lease has that holder.
	HeldBy string
}

// ControllerStatus says where one of nephele's controllers runs.
type ControllerStatus struct {
	Name string
	// Lease guards it: the migration lease when the controller is migrated and the
	// lease exists, else nephele's main lease.
	Lease string
	// RunBy is the component that holds Lease; empty when nobody holds it.
	RunBy string
	// Holder is Lease's holder.
	Holder string
}

// NewStatus reads who runs what from s's leases. migrated are the nephele controllers
// (canonical names) guarded by the migration lease; specs are nephele's controllers.
func NewStatus(s *Snapshot, leases Leases, specs []manager.ControllerSpec, migrated []string) *Status {
	leases = leases.complete()
	st := &Status{Time: s.Time}
	role := func(l Lease) string {
		switch {
		case l.Name == leases.Nephele:
			return "nephele"
		case l.Name == leases.Migration:
			return "migration"
		case l.Name == KubeControllerManagerLease:
			return string(KubeControllerManager)
		case l.Name == leases.Old || strings.Contains(l.Name, "cloud-controller-manager"):
			return string(CloudControllerManager)
		}
		return l.Name
	}
	for _, l := range s.Leases {
		st.Leases = append(st.Leases, LeaseStatus{Lease: l, Held: l.Held(s.Time), Role: role(l)})
	}
	// The migration lease's holder also holds the main lease of its component.
	for i, ls := range st.Leases {
		if ls.Role != "migration" || ls.Holder == "" {
			continue
		}
		for _, other := range st.Leases {
			if other.Name != ls.Name && other.Holder == ls.Holder {
				st.Leases[i].HeldBy = other.Role
			}
		}
	}
	find := func(name string) (LeaseStatus, bool) {
		i := slices.IndexFunc(st.Leases, func(l LeaseStatus) bool { return l.Name == name })
		if i < 0 {
			return LeaseStatus{}, false
		}
		return st.Leases[i], true
	}
	for _, spec := range specs {
		cs := ControllerStatus{Name: spec.Name, Lease: s.Namespace + "/" + leases.Nephele}
		l, ok := find(leases.Nephele)
		if ml, mok := find(leases.Migration); mok && slices.Contains(migrated, spec.Name) {
			cs.Lease, l, ok = ml.String(), ml, true
		}
		if ok && l.Held {
			cs.Holder = l.Holder
			cs.RunBy = l.Role
			if l.Role == "migration" {
				cs.RunBy = l.HeldBy
				if cs.RunBy == "" {
					cs.RunBy = "unknown"
				}
			}
		}
		st.Controllers = append(st.Controllers, cs)
	}
	return st
}

// MigratedControllers returns the nephele controllers a LeaderMigrationConfiguration
// guards with the migration lease, for nephele: cfg nil means upstream's default.
func MigratedControllers(cfg *migration.Config, specs []manager.ControllerSpec) ([]string, error) {
	if cfg == nil {
		cfg = migration.Default()
	}
	var all []string
	for _, s := range specs {
		all = append(all, s.Name)
	}
	plan, err := cfg.Classify(manager.Component, all, func(name string) (string, bool) { return manager.CanonicalName(specs, name) })
	if err != nil {
		return nil, fmt.Errorf("leader migration config: %w", err)
	}
	return plan.Migrated, nil
}
