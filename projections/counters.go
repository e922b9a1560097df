package projections

import (
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/partnergiving/giving/domain"
)

// counters is a transaction's write-back cache of the counters some events
// add to (a church's balance, an account's total): each is read from the
// file at its first addition in the transaction, added to in memory, and
// written once, with the transaction's checkpoint. A rebuild's transaction
// adds tens of thousands of deposits to a thousand churches' counters;
// read and written at each deposit, they were a third of the applier's
// time. Only the appliers that add to them read them in a transaction, and
// they do through the cache.
type counters struct {
	tx *bolt.Tx
	// set holds, per bucket, the values set in the transaction.
	set map[string]map[string][]byte
}

func newCounters(tx *bolt.Tx) *counters {
	return &counters{tx: tx, set: map[string]map[string][]byte{}}
}

// counting registers an event type's additions to counters.
func counting(eventType string, add func(c *counters, ev domain.Event)) {
	if _, ok := domain.EventTypeSpec(eventType); !ok {
		panic("projections: unknown event type " + eventType)
	}
	adders[eventType] = append(adders[eventType], add)
}

var adders = map[string][]func(c *counters, ev domain.Event){}

// get returns the counter's value: as set in the transaction, else as the
// file holds it (nil when it has none).
func (c *counters) get(bucket []byte, key string) []byte {
	if v, ok := c.set[string(bucket)][key]; ok {
		return v
	}
	return c.tx.Bucket(bucket).Get([]byte(key))
}

// put sets the counter's value, to be written with the checkpoint.
func (c *counters) put(bucket []byte, key string, v []byte) {
	m, ok := c.set[string(bucket)]
	if !ok {
		m = map[string][]byte{}
		c.set[string(bucket)] = m
	}
	m[key] = v
}

// write writes the values set, each bucket's in key order.
func (c *counters) write() error {
	for name, m := range c.set {
		b := c.tx.Bucket([]byte(name))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := b.Put([]byte(k), m[k]); err != nil {
				return err
			}
		}
	}
	return nil
}
