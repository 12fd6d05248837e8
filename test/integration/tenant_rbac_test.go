package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// schedulingGroups are the API groups whose objects steer scheduling.
var schedulingGroups = []string{"scheduling.phalanx.dev", "scheduling.k8s.io", "scheduling.x-k8s.io"}

// TestAggregatedRolesNeverWriteGroupStatus reads every role each
// kustomization installs: a role that kube-controller-manager folds into
// the built-in admin, edit or view roles (an aggregate-to-* label) reaches
// every namespace user, and must not let them write the status of a group,
// whose conditions the scheduler owns, nor hold a wildcard over a
// scheduling API group.
func TestAggregatedRolesNeverWriteGroupStatus(t *testing.T) {
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "*"}
	for _, k := range kustomizations {
		t.Run(k.dir, func(t *testing.T) {
			found := 0
			for _, o := range renderKustomization(t, k.dir) {
				if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
					continue
				}
				if !aggregated(o.GetLabels()) {
					continue
				}
				found++
				var role rbacv1.ClusterRole
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role))
				for _, rule := range role.Rules {
					if !slices.ContainsFunc(rule.APIGroups, func(g string) bool { return g == "*" || slices.Contains(schedulingGroups, g) }) {
						continue
					}
					for _, res := range rule.Resources {
						assert.NotContains(t, res, "*", "%s %s: a wildcard over the scheduling groups", o.GetKind(), o.GetName())
						if strings.HasSuffix(res, "/status") {
							for _, v := range rule.Verbs {
								assert.NotContains(t, writes, v, "%s %s grants %s on %s to every namespace user", o.GetKind(), o.GetName(), v, res)
							}
						}
					}
				}
			}
			assert.Positive(t, found, "the kustomization installs the aggregated roles phalanx-edit and phalanx-view")
		})
	}
}

// aggregated reports whether a role's labels fold it into a built-in role.
func aggregated(labels map[string]string) bool {
	for l, v := range labels {
		if strings.HasPrefix(l, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" {
			return true
		}
	}
	return false
}

// TestTenantRolesGrantGroupsButNotTheirStatus asks the API server's RBAC
// about namespace users bound, in their namespace, to the roles that the
// built-in edit and view roles aggregate: an editor manages the groups and
// Workloads of its namespace but writes no status and nothing in another
// namespace; a viewer reads them, status included, and writes nothing.
func TestTenantRolesGrantGroupsButNotTheirStatus(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	objs := renderKustomization(t, "manifests/base")
	applier := newObjectApplier(t, c.Config)
	for _, name := range []string{"phalanx-edit", "phalanx-view"} {
		role := findObject(objs, "ClusterRole", "", name)
		require.NotNil(t, role, "the base installs ClusterRole %s", name)
		require.NoError(t, applier.apply(ctx, role))
	}
	own, other := namespace(t, c), namespace(t, c)
	// The built-in edit role aggregates view: an editor holds both.
	for user, roles := range map[string][]string{"editor": {"phalanx-edit", "phalanx-view"}, "viewer": {"phalanx-view"}} {
		for _, role := range roles {
			_, err := c.Client.RbacV1().RoleBindings(own).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	type request struct{ ns, verb, resource, sub string }
	allowed := func(user string, r request) (bool, error) {
		res, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: r.ns, Verb: r.verb, Group: "scheduling.phalanx.dev", Resource: r.resource, Subresource: r.sub,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return res.Status.Allowed, nil
	}
	var manage, read, writeStatus, elsewhere []request
	for _, res := range []string{"podgroups", "compositepodgroups", "workloads"} {
		for _, v := range []string{"create", "update", "patch", "delete"} {
			manage = append(manage, request{own, v, res, ""})
			writeStatus = append(writeStatus, request{own, v, res, "status"})
			elsewhere = append(elsewhere, request{other, v, res, ""})
		}
		for _, v := range []string{"get", "list", "watch"} {
			read = append(read, request{own, v, res, ""})
		}
		read = append(read, request{own, "get", res, "status"})
		elsewhere = append(elsewhere, request{other, "get", res, ""})
	}
	tests := []struct {
		name          string
		user          string
		allow, refuse [][]request
	}{
		{name: "an editor manages its namespace's groups but writes no status and nothing elsewhere", user: "editor",
			allow: [][]request{manage, read}, refuse: [][]request{writeStatus, elsewhere}},
		{name: "a viewer reads its namespace's groups and their status and writes nothing", user: "viewer",
			allow: [][]request{read}, refuse: [][]request{manage, writeStatus, elsewhere}},
	}
	// The authorizer learns of the bindings through its informers: wait
	// until every grant shows, then the refusals mean something.
	eventually(t, 30*time.Second, "every grant of the bindings authorized", func() (bool, error) {
		for _, tt := range tests {
			for _, set := range tt.allow {
				for _, r := range set {
					if ok, err := allowed(tt.user, r); err != nil || !ok {
						return false, err
					}
				}
			}
		}
		return true, nil
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, set := range tt.allow {
				for _, r := range set {
					ok, err := allowed(tt.user, r)
					require.NoError(t, err)
					assert.True(t, ok, "%s may %s %s/%s in %s", tt.user, r.verb, r.resource, r.sub, r.ns)
				}
			}
			for _, set := range tt.refuse {
				for _, r := range set {
					ok, err := allowed(tt.user, r)
					require.NoError(t, err)
					assert.False(t, ok, "%s may not %s %s/%s in %s", tt.user, r.verb, r.resource, r.sub, r.ns)
				}
			}
		})
	}
}
