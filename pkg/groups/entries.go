package groups

import (
	"sort"
	"strings"
)

// Entry is one group as the cache holds it, for diagnostics (the
// scheduler's /debug/phalanx/groups). Placeholders are entries too: groups
// that pods or children name but whose object the cache has not seen.
type Entry struct {
	Info
	// Exists is false for a placeholder.
	Exists     bool
	ParentName string
	// Children are the keys of the composite's child groups, sorted.
	Children []Key
	// Per-state member counts of a leaf.
	Pending, Assumed, Finished int
	// Members, sorted by name, are filled by Entry only.
	Members []Member
}

func entryOf(c *Cache, g *Group, members bool) Entry {
	e := Entry{Info: infoOf(g), Exists: g.Exists, ParentName: g.ParentName,
		Pending: g.counts[Pending], Assumed: g.counts[Assumed], Finished: g.counts[Finished]}
	for k := range g.children {
		if ch := c.groups[k]; ch != nil {
			e.Children = append(e.Children, k)
		}
	}
	sort.Slice(e.Children, func(i, j int) bool { return e.Children[i].String() < e.Children[j].String() })
	if members && g.IsLeaf() {
		for _, m := range g.members {
			e.Members = append(e.Members, *m)
		}
		sort.Slice(e.Members, func(i, j int) bool { return e.Members[i].Pod.Name < e.Members[j].Pod.Name })
	}
	return e
}

// Entries lists every group the cache holds, without members, in the
// order of their keys' strings.
func (c *Cache) Entries() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Entry, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, entryOf(c, g, false))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Entry returns group k with its members.
func (c *Cache) Entry(k Key) (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	g := c.groups[k]
	if g == nil {
		return Entry{}, false
	}
	return entryOf(c, g, true), true
}

// Find returns the keys of the groups called namespace/name, in any
// dialect and kind that match: a user asking about "podgroup x" may mean
// any API's PodGroup x, or a label gang x. Sorted by key string.
func (c *Cache) Find(namespace, name string, match func(Key) bool) []Key {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Key
	for k := range c.groups {
		if k.Namespace == namespace && k.Name == name && (match == nil || match(k)) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].String(), out[j].String()) < 0 })
	return out
}
