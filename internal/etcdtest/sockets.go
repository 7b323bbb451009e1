package etcdtest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Which process dialed a connection a peer proxy accepted. Every member dials from 127.0.0.1,
// so the address says nothing; the kernel's socket table (/proc/net/tcp) maps the dialer's
// port to a socket inode, and /proc/<pid>/fd says which process holds that socket. Both are
// readable without root for processes of the same user.

// portPair is a TCP socket's local and remote port.
type portPair struct{ local, remote int }

// socketInodes maps the port pairs of the host's TCP sockets (IPv4 and IPv6) to their inodes.
// Sockets without an inode (TIME_WAIT) are left out. It compares ports only: every socket the
// harness cares about is on 127.0.0.1.
func socketInodes() (map[portPair]uint64, error) {
	out := map[portPair]uint64{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, fs.ErrNotExist) && table == "/proc/net/tcp6" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("read socket table: %w", err)
		}
		err = parseSocketTable(bufio.NewScanner(f), out)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", table, err)
		}
	}
	return out, nil
}

// parseSocketTable reads the lines of a /proc/net/tcp{,6} table:
// "sl local_address rem_address st ... uid timeout inode ...", addresses as HEXIP:HEXPORT.
func parseSocketTable(sc *bufio.Scanner, out map[portPair]uint64) error {
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		local, err1 := hexPort(f[1])
		remote, err2 := hexPort(f[2])
		inode, err3 := strconv.ParseUint(f[9], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		if inode != 0 {
			out[portPair{local, remote}] = inode
		}
	}
	return sc.Err()
}

func hexPort(addr string) (int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return 0, fmt.Errorf("address %q has no port", addr)
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	return int(p), err
}

// processSockets returns the inodes of the sockets process pid holds open.
func processSockets(pid int) (map[uint64]bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list sockets of pid %d: %w", pid, err)
	}
	out := map[uint64]bool{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(target, "socket:["); ok {
			if inode, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out[inode] = true
			}
		}
	}
	return out, nil
}
