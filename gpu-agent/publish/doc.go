// Package publish writes what discovery found onto the agent's Node: the fairway.dev/gpu-*
// labels and the fairway.dev/gpu-inventory annotation.
//
// It patches only what differs from the Node as it is (so other writers' labels are never
// touched and an unchanged node costs no write), except that the inventory is re-confirmed
// every refresh period: its ObservedAt then tells the scheduler whether the agent is alive,
// and an inventory much older than RefreshSeconds is stale.
package publish
