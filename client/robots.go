package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-registry/berth/auth"
)

// RobotRequest asks for a new robot account: POST /api/v1/robots.
type RobotRequest struct {
	// Namespace the robot belongs to; its scopes stay within it.
	Namespace string
	// Name of the robot within the namespace.
	Name string
	// Description says what the robot is for.
	Description string
	// Scopes grant the robot actions on repositories of its namespace.
	Scopes []auth.RobotScope
	// ExpiresIn is the robot's lifetime from now; every robot expires, and
	// the server caps the lifetime (auth.robots.maxExpiry).
	ExpiresIn time.Duration
}

// robotRequestBody is RobotRequest as the API takes it.
type robotRequestBody struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Scopes      []auth.RobotScope `json:"scopes"`
	ExpiresIn   string            `json:"expiresIn"`
}

// NewRobot is a robot account just created, with the only copy of its secret.
type NewRobot struct {
	// Robot is the account as the server stored it.
	Robot auth.Robot `json:"robot"`
	// Username is the name the robot logs in with: robot+NAMESPACE+NAME.
	Username string `json:"username"`
	// Secret is the robot's password. The server keeps only its hash: it is
	// never shown again.
	Secret string `json:"secret"`
}

// robotList is the answer of GET /api/v1/robots.
type robotList struct {
	Robots []auth.Robot `json:"robots"`
}

// CreateRobot creates a robot account and returns it with its secret. The
// request is checked as the server would, but for the maximum lifetime,
// before it is sent: a bad name, a scope outside the namespace, an action
// other than pull, push, delete and sign, or no expiry is refused with
// ErrInvalid. Creating robots needs admin on the namespace.
func (c *Catalog) CreateRobot(ctx context.Context, req RobotRequest) (*NewRobot, error) {
	op := "create robot " + req.Namespace + "/" + req.Name
	now := time.Now()
	if req.ExpiresIn <= 0 {
		return nil, fmt.Errorf("%s: %w: expiry: required and positive; robots always expire", op, ErrInvalid)
	}
	check := auth.Robot{Namespace: req.Namespace, Name: req.Name, Scopes: req.Scopes, ExpiresAt: now.Add(req.ExpiresIn)}
	if err := check.Validate(now, req.ExpiresIn); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", op, ErrInvalid, err)
	}
	body := robotRequestBody{
		Namespace: req.Namespace, Name: req.Name, Description: req.Description,
		Scopes: req.Scopes, ExpiresIn: req.ExpiresIn.String(),
	}
	var res NewRobot
	if err := c.do(ctx, op, http.MethodPost, "/robots", nil, body, http.StatusCreated, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Robots lists the robot accounts of namespace, or of every namespace the
// caller administers when namespace is empty; revoked and expired robots
// are listed too.
func (c *Catalog) Robots(ctx context.Context, namespace string) ([]auth.Robot, error) {
	op := "list robots"
	var q url.Values
	if namespace != "" {
		op += " of " + namespace
		if err := checkComponent("namespace", namespace); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", op, ErrInvalid, err)
		}
		q = url.Values{"namespace": {namespace}}
	}
	var res robotList
	if err := c.get(ctx, op, "/robots", q, &res); err != nil {
		return nil, err
	}
	return res.Robots, nil
}

// Robot returns one robot account, revoked or not.
func (c *Catalog) Robot(ctx context.Context, namespace, name string) (*auth.Robot, error) {
	op, path, err := robotPath("robot", namespace, name)
	if err != nil {
		return nil, err
	}
	var res auth.Robot
	if err := c.get(ctx, op, path, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RevokeRobot revokes a robot account: its next request fails, whatever
// tokens it holds.
func (c *Catalog) RevokeRobot(ctx context.Context, namespace, name string) error {
	op, path, err := robotPath("revoke robot", namespace, name)
	if err != nil {
		return err
	}
	return c.do(ctx, op, http.MethodDelete, path, nil, nil, http.StatusNoContent, nil)
}

// robotPath checks a robot's namespace and name and returns the prefix of
// errors, verb namespace/name, and the robot's API path.
func robotPath(verb, namespace, name string) (op, path string, err error) {
	op = verb + " " + namespace + "/" + name
	if err := checkNames(op, namespace, name); err != nil {
		return "", "", err
	}
	return op, "/robots/" + url.PathEscape(namespace) + "/" + url.PathEscape(name), nil
}
