package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/authstore"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/olm"
)

// newAuthCmd returns `berth auth`, the commands about access rules.
func newAuthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Explain berth's access decisions",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newAuthCheckCmd())
	return cmd
}

func newAuthCheckCmd() *cobra.Command {
	var (
		flags  serveFlags
		groups []string
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "check SUBJECT REPOSITORY ACTION",
		Short: "Say whether a subject may do an action on a repository, and which rule decides",
		Long: `Decide as berth serve would, with the same configuration (--config, BERTH_*
environment variables), whether SUBJECT may do ACTION on REPOSITORY, and print
the rule that decided and why. The exit status is 0 when the action is allowed
and 1 when it is denied.

SUBJECT is anonymous, user:NAME (in the groups auth.groups gives it),
oidc:NAME (in the groups given with --group) or robot:NAMESPACE+NAME (with the
scopes the robot store holds). REPOSITORY is namespace/name, namespace/* for
namespace-wide actions (managing robots) or */* for registry-wide ones.
ACTION is pull, push, delete, sign or admin.`,
		Example: `  berth auth check user:alice team-a/kafka push --config berth.yaml
  berth auth check anonymous public/etcd pull --config berth.yaml
  berth auth check oidc:ci --group deployers team-a/kafka pull --config berth.yaml
  berth auth check robot:team-a+ci team-a/kafka delete --config berth.yaml`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := args[1]
			if err := checkResource(repo); err != nil {
				return err
			}
			action, err := auth.ParseAction(args[2])
			if err != nil {
				return err
			}
			subject := args[0]
			if err := checkRequestSubject(subject); err != nil {
				return err
			}
			if len(groups) > 0 && !strings.HasPrefix(subject, "oidc:") {
				return fmt.Errorf("--group is for oidc subjects; %s takes its groups from the configuration", subject)
			}
			cfg, err := flags.load(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var (
				policy *auth.Policy // nil: auth is off
				id     = auth.Identity{Subject: subject}
			)
			if cfg.Auth != nil {
				if policy, err = auth.NewPolicy(cfg.Auth); err != nil {
					return fmt.Errorf("config: %w", err)
				}
				if id, err = identity(cmd.Context(), cfg, subject, groups); err != nil {
					return err
				}
			}
			res := authCheckResult{Subject: subject, Repository: repo, Action: string(action)}
			if err := activeRobot(id); err != nil {
				res.Reason = err.Error()
			} else {
				d := policy.Decide(id, repo, action)
				res.Allowed, res.Reason, res.Rule = d.Allowed, d.Reason, d.Rule
			}
			if format == formatJSON {
				err = writeJSON(out, res)
			} else {
				err = res.writeText(out)
			}
			if err != nil {
				return err
			}
			if !res.Allowed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	flags.register(cmd)
	addFormatFlag(cmd, &format)
	if err := cmd.Flags().MarkHidden("addr"); err != nil {
		panic(err)
	}
	cmd.Flags().StringArrayVar(&groups, "group", nil, "a `GROUP` the oidc subject is in (repeatable)")
	return cmd
}

// authCheckResult is the decision berth auth check prints.
type authCheckResult struct {
	Subject    string `json:"subject"`
	Repository string `json:"repository"`
	Action     string `json:"action"`
	Allowed    bool   `json:"allowed"`
	// Reason says why, in words.
	Reason string `json:"reason"`
	// Rule is the rule that decided; empty when none did.
	Rule string `json:"rule,omitempty"`
}

// writeText writes the decision as lines: "allowed: REASON" or "denied:
// REASON", then "rule: RULE" when a rule decided.
func (r authCheckResult) writeText(w io.Writer) error {
	verdict := "denied"
	if r.Allowed {
		verdict = "allowed"
	}
	if _, err := fmt.Fprintf(w, "%s: %s\n", verdict, r.Reason); err != nil || r.Rule == "" {
		return err
	}
	_, err := fmt.Fprintf(w, "rule: %s\n", r.Rule)
	return err
}

// activeRobot returns why the robot of id may not authenticate now, nil
// when it may or id is no robot.
func activeRobot(id auth.Identity) error {
	if id.Robot == nil {
		return nil
	}
	return id.Robot.Active(time.Now())
}

// checkRequestSubject checks the SUBJECT of auth check: a subject a request
// can have, not a rule's group:NAME or authenticated.
func checkRequestSubject(s string) error {
	if err := config.CheckSubject(s); err != nil {
		return fmt.Errorf("SUBJECT: %w", err)
	}
	if s == "authenticated" || strings.HasPrefix(s, "group:") {
		return fmt.Errorf("SUBJECT %q names no one caller: want anonymous, user:NAME, oidc:NAME or robot:NAMESPACE+NAME (give an oidc subject's groups with --group)", s)
	}
	return nil
}

// checkResource checks the REPOSITORY of auth check: namespace/name,
// namespace/*, */* or a namespace's OLM catalog, namespace/olm/catalog.
func checkResource(repo string) error {
	if _, ok := olm.CatalogNamespace(repo); ok {
		return nil
	}
	ns, name, ok := strings.Cut(repo, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") || (ns == "*" && name != "*") {
		return fmt.Errorf("REPOSITORY %q: want namespace/name, namespace/*, */* or namespace/olm/catalog", repo)
	}
	return nil
}

// identity is the identity of subject as berth would establish it: a user's
// groups from the configuration, an oidc subject's from groups, a robot from
// the robot store.
func identity(ctx context.Context, cfg *config.Config, subject string, groups []string) (auth.Identity, error) {
	id := auth.Identity{Subject: subject}
	kind, name, _ := strings.Cut(subject, ":")
	switch kind {
	case "user":
		for g, users := range cfg.Auth.Groups {
			if slices.Contains(users, name) {
				id.Groups = append(id.Groups, g)
			}
		}
		slices.Sort(id.Groups)
	case "oidc":
		id.Groups = groups
	case "robot":
		robot, err := lookupRobot(ctx, cfg, name)
		if err != nil {
			return id, err
		}
		id.Robot = robot
	}
	return id, nil
}

// lookupRobot returns the robot NAMESPACE+NAME from the robot store cfg
// names (authstore.Open).
func lookupRobot(ctx context.Context, cfg *config.Config, name string) (*auth.Robot, error) {
	namespace, robotName, _ := strings.Cut(name, "+")
	store, err := authstore.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	robot, err := store.Get(ctx, namespace, robotName)
	if err != nil {
		return nil, err
	}
	return robot, nil
}
