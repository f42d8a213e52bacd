package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// HostFile is a file of this machine to put into an image: a program from a Debian
// package, a configuration file.
type HostFile struct {
	// Path is where it goes in the image, e.g. /bin/sh.
	Path string
	// From is the file on this machine, e.g. /usr/bin/dash; Path when empty. Symbolic
	// links are followed: the image gets the file's content.
	From string
}

// HostPrograms packs programs of this machine into image files together with their
// shared-library closure, so that dynamically linked programs from Debian packages run
// in an image with no distribution under them. Each library is found with ldd(1), which
// asks the dynamic loader itself (search paths, ld.so.cache, the loader's own path), and
// goes into the image at the path the loader resolved it to; the loader goes in at the
// path the programs name (their PT_INTERP). Libraries several programs need are packed
// once. Programs the loader does not know (static ones, scripts) are packed alone.
//
// The libraries are the machine's, so the image works on machines of this
// architecture; the image is reproducible on machines with the same package versions.
func HostPrograms(ctx context.Context, programs ...HostFile) ([]File, error) {
	var files []File
	seen := map[string]bool{}
	add := func(imagePath, from string, mode int64) error {
		if seen[imagePath] {
			return nil
		}
		seen[imagePath] = true
		f, err := ReadFile(imagePath, from, mode)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	}
	for _, p := range programs {
		from := p.From
		if from == "" {
			from = p.Path
		}
		if err := add(p.Path, from, 0o755); err != nil {
			return nil, fmt.Errorf("host program %s: %w", p.Path, err)
		}
		libs, err := sharedLibraries(ctx, from)
		if err != nil {
			return nil, fmt.Errorf("host program %s: %w", from, err)
		}
		for _, lib := range libs {
			if err := add(lib, lib, 0o755); err != nil {
				return nil, fmt.Errorf("host program %s: library: %w", from, err)
			}
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// HostConfigFiles packs files of this machine as they are (mode 0644).
func HostConfigFiles(files ...HostFile) ([]File, error) {
	out := make([]File, 0, len(files))
	for _, h := range files {
		from := h.From
		if from == "" {
			from = h.Path
		}
		f, err := ReadFile(h.Path, from, 0o644)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// sharedLibraries lists the absolute paths of the libraries the dynamic loader maps for
// program, the loader included; none for a static program.
func sharedLibraries(ctx context.Context, program string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "ldd", program)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	// ldd exits 1 for a static program or a script: "not a dynamic executable".
	if strings.Contains(out, "not a dynamic executable") || strings.Contains(out, "statically linked") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", program, err, strings.TrimSpace(out))
	}
	return parseLdd(stdout.String())
}

// parseLdd reads ldd's output: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)",
// "/lib64/ld-linux-x86-64.so.2 (0x...)", and "linux-vdso.so.1 (0x...)" for the vDSO, which
// the kernel provides. A library ldd could not find fails: the program would not start.
func parseLdd(out string) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, target, arrow := strings.Cut(line, "=>")
		if arrow {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				return nil, fmt.Errorf("library %s not found", strings.TrimSpace(name))
			}
		} else {
			target = name
		}
		path, _, _ := strings.Cut(strings.TrimSpace(target), " (")
		if !filepath.IsAbs(path) {
			continue // the vDSO
		}
		libs = append(libs, filepath.Clean(path))
	}
	return libs, sc.Err()
}

// LookHostProgram finds a program of this machine on PATH and the system directories,
// saying which Debian package provides it when it is missing.
func LookHostProgram(name, debianPackage string) (string, error) {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: install the Debian package %s (hack/install-node-deps.sh --e2e)", name, debianPackage)
}

// HostTool is a program of this machine that an image carries: where it goes in the
// image, the name to look for here, and the Debian package that provides it (named in
// the error when it is missing).
type HostTool struct {
	// Path is where it goes in the image, e.g. /usr/sbin/mkfs.ext4.
	Path string
	// Name is the program to look for on this machine (LookHostProgram).
	Name string
	// Package is the Debian package that provides it.
	Package string
}

// PackHostTools finds each tool on this machine and packs it with its shared-library
// closure (HostPrograms). Every missing tool is named in one error.
func PackHostTools(ctx context.Context, tools []HostTool) ([]File, error) {
	progs := make([]HostFile, 0, len(tools))
	var missing []string
	for _, t := range tools {
		from, err := LookHostProgram(t.Name, t.Package)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		progs = append(progs, HostFile{Path: t.Path, From: from})
	}
	if len(missing) > 0 {
		return nil, errors.New(strings.Join(missing, "; "))
	}
	return HostPrograms(ctx, progs...)
}
