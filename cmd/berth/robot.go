package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/client"
)

// newRobotCmd returns `berth robot`, which manages robot accounts.
func newRobotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "robot",
		Short: "Create, list and revoke robot accounts of a berth server",
		Long: `Manage the robot accounts of a berth server: non-human users of one namespace,
for CI jobs and deployments, scoped to repositories of that namespace and to
the actions pull, push, delete and sign, and always expiring. Managing the
robots of a namespace needs admin on it. The server is named by --server (env
BERTH_SERVER), as for berth search; log in to it first with berth login.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newRobotCreateCmd(), newRobotListCmd(), newRobotRevokeCmd())
	return cmd
}

func newRobotCreateCmd() *cobra.Command {
	var (
		flags   catalogFlags
		scopes  []string
		expires time.Duration
		req     client.RobotRequest
		format  outputFormat
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE/NAME",
		Short: "Create a robot account and show its secret, once",
		Long: `Create a robot account. Each --scope grants actions on the repositories a glob
matches, all within the robot's namespace: 'team-a/*:pull,push'. --expires is
mandatory; the server caps it (auth.robots.maxExpiry).

The robot logs in as robot+NAMESPACE+NAME with the secret printed here, which
is shown only now: the server keeps only its hash.`,
		Example: `  berth robot create team-a/ci --scope 'team-a/*:pull,push' --expires 720h --description "CI pushes"
  berth robot create team-a/deploy --scope 'team-a/kafka:pull' --scope 'team-a/zookeeper:pull' --expires 2160h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if req.Namespace, req.Name, err = parseRobotName(args[0]); err != nil {
				return err
			}
			if !cmd.Flags().Changed("expires") {
				return errors.New("--expires is required: robots always expire (e.g. --expires 720h)")
			}
			if expires <= 0 {
				return fmt.Errorf("--expires %s: want a positive duration, like 720h", expires)
			}
			if len(scopes) == 0 {
				return errors.New("--scope is required: at least one 'GLOB:ACTION,...', like 'team-a/*:pull'")
			}
			for _, s := range scopes {
				scope, err := parseScope(s)
				if err != nil {
					return err
				}
				req.Scopes = append(req.Scopes, scope)
			}
			req.ExpiresIn = expires
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			created, err := c.CreateRobot(cmd.Context(), req)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), created)
			}
			return writeNewRobot(cmd.OutOrStdout(), c.Host(), created)
		},
	}
	flags.add(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&scopes, "scope", nil, "`GLOB:ACTION,...` the robot may do: actions pull, push, delete, sign on the repositories GLOB matches (repeatable)")
	f.DurationVar(&expires, "expires", 0, "lifetime of the robot, like 720h (required)")
	f.StringVar(&req.Description, "description", "", "what the robot is for")
	addFormatFlag(cmd, &format)
	return cmd
}

func newRobotListCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "list [NAMESPACE]",
		Short: "List the robot accounts of a namespace, or of every namespace you administer",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var namespace string
			if len(args) == 1 {
				namespace = args[0]
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			robots, err := c.Robots(cmd.Context(), namespace)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), robots)
			}
			if len(robots) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no robots")
				return nil
			}
			return writeRobots(cmd.OutOrStdout(), robots, time.Now())
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

func newRobotRevokeCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "revoke NAMESPACE/NAME",
		Short: "Revoke a robot account: its next request fails",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			namespace, name, err := parseRobotName(args[0])
			if err != nil {
				return err
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			if err := c.RevokeRobot(cmd.Context(), namespace, name); err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), robotRevoked{Namespace: namespace, Name: name, Revoked: true})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Revoked robot %s/%s\n", namespace, name)
			return err
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

// robotRevoked is what berth robot revoke --format json prints.
type robotRevoked struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Revoked   bool   `json:"revoked"`
}

// parseRobotName splits NAMESPACE/NAME.
func parseRobotName(arg string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(arg, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("robot %q: want NAMESPACE/NAME, like team-a/ci", arg)
	}
	return namespace, name, nil
}

// parseScope parses a --scope: GLOB:ACTION[,ACTION...].
func parseScope(s string) (auth.RobotScope, error) {
	glob, list, ok := strings.Cut(s, ":")
	if !ok || glob == "" || list == "" {
		return auth.RobotScope{}, fmt.Errorf("--scope %q: want GLOB:ACTION,..., like 'team-a/*:pull,push'", s)
	}
	scope := auth.RobotScope{Repositories: []string{glob}}
	for _, a := range strings.Split(list, ",") {
		action, err := auth.ParseAction(strings.TrimSpace(a))
		if err != nil {
			return auth.RobotScope{}, fmt.Errorf("--scope %q: %w", s, err)
		}
		scope.Actions = append(scope.Actions, action)
	}
	return scope, nil
}

// writeNewRobot writes a created robot, its credentials and how to use them.
func writeNewRobot(w io.Writer, host string, r *client.NewRobot) error {
	t := newTable(w)
	t.row("Robot", r.Robot.Namespace+"/"+r.Robot.Name)
	t.row("Scopes", scopeList(r.Robot.Scopes))
	t.row("Expires", r.Robot.ExpiresAt.UTC().Format(time.RFC3339))
	t.row("Username", r.Username)
	t.row("Secret", r.Secret)
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `
The secret is shown only now and cannot be shown again: keep it in your CI's
secret store. Log in with it:
  echo "$SECRET" | berth login %s -u %s --password-stdin
`, host, r.Username)
	return err
}

// writeRobots writes robots as a table, with their state at now.
func writeRobots(w io.Writer, robots []auth.Robot, now time.Time) error {
	t := newColumns(w, "ROBOT", "SCOPES", "STATE", "EXPIRES", "LAST USED", "DESCRIPTION")
	for _, r := range robots {
		state := "active"
		if err := r.Active(now); err != nil {
			state = "expired"
			if !r.RevokedAt.IsZero() {
				state = "revoked"
			}
		}
		lastUsed := ""
		if !r.LastUsed.IsZero() {
			lastUsed = r.LastUsed.UTC().Format(time.RFC3339)
		}
		t.add(r.Namespace+"/"+r.Name, scopeList(r.Scopes), state, r.ExpiresAt.UTC().Format(time.RFC3339), lastUsed, r.Description)
	}
	return t.flush()
}

// scopeList renders scopes as they are given to --scope, separated by spaces.
func scopeList(scopes []auth.RobotScope) string {
	items := make([]string, 0, len(scopes))
	for _, s := range scopes {
		actions := make([]string, len(s.Actions))
		for i, a := range s.Actions {
			actions[i] = string(a)
		}
		items = append(items, strings.Join(s.Repositories, ",")+":"+strings.Join(actions, ","))
	}
	return strings.Join(items, " ")
}
