package browsertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Violation is one of axe-core's rules that a page breaks, with the
// elements that break it.
type Violation struct {
	// ID names the rule, such as "label" or "color-contrast".
	ID string `json:"id"`
	// Impact is how much the violation hurts: "minor", "moderate",
	// "serious" or "critical".
	Impact string `json:"impact"`
	// Help says in a sentence what the rule asks for.
	Help string `json:"help"`
	// HelpURL is the rule's page at Deque.
	HelpURL string `json:"helpUrl"`
	// Targets are CSS selectors of the elements that break the rule.
	Targets []string `json:"targets"`
}

// Serious reports whether the violation's impact is serious or critical.
func (v Violation) Serious() bool { return v.Impact == "serious" || v.Impact == "critical" }

// shownTargets is how many elements String names.
const shownTargets = 5

// String gives the rule, its impact, what it asks for and the first few
// elements.
func (v Violation) String() string {
	targets := strings.Join(v.Targets[:min(len(v.Targets), shownTargets)], ", ")
	if more := len(v.Targets) - shownTargets; more > 0 {
		targets += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, targets)
}

// axeRun runs every rule axe-core enables by default on the document and
// keeps what Violation holds.
const axeRun = `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({
	id: v.id, impact: v.impact || '', help: v.help, helpUrl: v.helpUrl,
	targets: v.nodes.map(n => n.target.flat(Infinity).join(' '))})))`

// axeTimeout bounds one run of axe-core.
const axeTimeout = 30 * time.Second

// Axe runs axe-core's accessibility rules on the page loaded in the tab and
// returns the rules it breaks. It injects axe-core through the DevTools
// protocol, which a page's Content-Security-Policy does not govern, so it
// works on pages that allow no inline script or eval. In a tab with
// JavaScript off, it turns script execution on while axe-core runs (the
// page's own scripts, skipped when it loaded, stay unrun) and off again.
func Axe(ctx context.Context) (vs []Violation, err error) {
	if shared == nil {
		return nil, errors.New("browsertest: Axe needs a tab of the browser Start returns")
	}
	ctx, cancel := context.WithTimeout(ctx, axeTimeout)
	defer cancel()
	if scriptsOff(ctx) {
		if err := chromedp.Do(ctx, scripts(true)); err != nil {
			return nil, fmt.Errorf("axe: %w", err)
		}
		defer func() {
			// Off again, also when axe-core failed or ran out of time.
			off, cancel := context.WithTimeout(context.WithoutCancel(ctx), axeTimeout)
			defer cancel()
			if offErr := chromedp.Do(off, scripts(false)); offErr != nil && err == nil {
				vs, err = nil, fmt.Errorf("axe: turning JavaScript off again: %w", offErr)
			}
		}()
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.axe === 'object'`))
	if err != nil {
		return nil, fmt.Errorf("axe: %w", err)
	}
	if !loaded {
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](shared.axe)); err != nil {
			return nil, fmt.Errorf("axe: injecting axe-core: %w", err)
		}
	}
	vs, err = chromedp.Run(ctx, chromedp.Evaluate[[]Violation](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("axe: %w", err)
	}
	return vs, nil
}
