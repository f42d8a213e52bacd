// Package ownership lets each cloud controller act only on the nodes its CCM owns
// (cloud.NodeOwnership, KEP-5778): a Gate answers for one controller, records a NotOwned
// Event once per node it leaves alone, and counts the nodes it skipped by reason in
// nephele_node_ownership_skipped_total.
package ownership
