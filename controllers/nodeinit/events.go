package nodeinit

// Event reasons.
const (
	EventSynced                = "Synced"
	EventInstanceNotFound      = "InstanceNotFound"
	EventInitializationFailed  = "InitializationFailed"
	EventProvidedNodeIPInvalid = "ProvidedNodeIPInvalid"
	EventNoAddresses           = "NoAddresses"
	EventNoProviderID          = "NoProviderID"
	EventLabelRefused          = "LabelRefused"
	EventAddressesNotUpdated   = "AddressesNotUpdated"
)
