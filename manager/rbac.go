package manager

// RBACRule is one permission a controller's requests need (a ControllerSpec's RBAC),
// and the code path that makes them. It is the data deploy/render turns into RBAC
// PolicyRules and into docs/deploy.md's permission tables, so Why is written for a
// reader of those tables: the controller, what it does, and the file that does it.
type RBACRule struct {
	// Group is the resource's API group; "" is the core group.
	Group string
	// Resource is the resource, or resource/subresource (nodes/status).
	Resource string
	// Verbs are the request verbs (get, patch, delete, ...); never "*".
	Verbs []string
	// ResourceNames limits the rule to these objects; empty means all.
	ResourceNames []string
	// Why is the code path that makes the request.
	Why string
}
