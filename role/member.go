package role

// This file adapts cluster.Member as it is to the Engine the roles use,
// and is all that does: Member.Run takes one callback, called with the
// whole budget while the member leads and with its share while NATS is
// away, and none for following, which the Cluster role plays whenever it
// plays no other. Once Member.Run takes cluster.Roles and the member has
// AloneShare, Roles is cluster.Roles, the member itself is the Engine, and
// this file goes.

import (
	"context"

	"marketfeed/cluster"
)

// Roles is what a member calls as its part changes.
type Roles struct {
	OnLead   func(ctx context.Context) // while this member holds the lease; ctx ends with the term
	OnFollow func(ctx context.Context) // while in the cluster and not leading
	OnAlone  func(ctx context.Context) // while NATS is unreachable; read the venue with AloneShare()
}

// memberEngine is a cluster.Member as an Engine.
type memberEngine struct{ *cluster.Member }

func engineOf(m *cluster.Member) Engine { return memberEngine{m} }

// Run calls OnAlone when the member reads alone, OnLead when it leads.
func (m memberEngine) Run(ctx context.Context, r Roles) error {
	return m.Member.Run(ctx, func(ctx context.Context, _ float64) {
		if m.Alone() {
			r.OnAlone(ctx)
			return
		}
		r.OnLead(ctx)
	})
}

// AloneShare is one over the members last seen: while NATS is away, the
// members as they were when it went.
func (m memberEngine) AloneShare() float64 { return 1 / float64(m.Members()) }
