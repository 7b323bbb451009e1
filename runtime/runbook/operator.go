// Package runbook runs a member through a person: for nodes etcdmedic cannot act on, every
// step is printed as the exact commands to run on that node, and etcdmedic waits until the
// operator confirms the checkpoint, then verifies it over the etcd API before going on.
package runbook

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// ErrAborted means the operator typed "abort" at a checkpoint.
var ErrAborted = errors.New("the operator aborted at a checkpoint")

// Operator is the person at the other end: checkpoints are printed to Out and answered on In.
type Operator struct {
	Out io.Writer
	mu  sync.Mutex
	in  *bufio.Reader
}

// NewOperator reads answers from in and prints checkpoints to out.
func NewOperator(in io.Reader, out io.Writer) *Operator {
	return &Operator{Out: out, in: bufio.NewReader(in)}
}

// Checkpoint is one thing the operator does on one node.
type Checkpoint struct {
	Node     string
	Title    string
	Commands []string // shell commands, run on Node in this order
	Notes    []string // what to look for, shown after the commands
}

// Prompt is the line that asks for the operator's answer; a test double of the operator
// waits for it.
const Prompt = `type "done" when finished (or "abort"): `

// Confirm prints the checkpoint and waits until the operator answers "done" (or just Enter).
func (o *Operator) Confirm(c Checkpoint) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.Out, "\n>>> on node %s: %s\n", c.Node, c.Title)
	for _, cmd := range c.Commands {
		fmt.Fprintf(o.Out, "    $ %s\n", cmd)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(o.Out, "    # %s\n", n)
	}
	for range 100 {
		fmt.Fprint(o.Out, Prompt)
		line, err := o.in.ReadString('\n')
		answer := strings.ToLower(strings.TrimSpace(line))
		switch {
		case answer == "done" || answer == "yes" || answer == "y" || (answer == "" && err == nil):
			return nil
		case answer == "abort":
			return ErrAborted
		case err != nil:
			return fmt.Errorf("no answer at the checkpoint %q on %s (input closed): run apply again in a terminal; done steps are skipped", c.Title, c.Node)
		}
		fmt.Fprintf(o.Out, "    (answer %q not understood)\n", answer)
	}
	return fmt.Errorf("no usable answer at the checkpoint %q", c.Title)
}

// Say prints a line for the operator.
func (o *Operator) Say(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.Out, "    "+format+"\n", args...)
}
