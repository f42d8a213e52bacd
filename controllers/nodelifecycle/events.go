package nodelifecycle

// Event reasons.
const (
	EventDeletingNode         = "DeletingNode"
	EventDeletingNodeFailed   = "DeletingNodeFailed"
	EventNodeDeletionSafeMode = "NodeDeletionSafeMode"
)
