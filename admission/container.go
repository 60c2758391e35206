package admission

import (
	"errors"
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"headroom.dev/headroom/vllm"
)

// launch is how a container starts vLLM, as far as the webhook can read it.
type launch struct {
	settings vllm.Settings
	// appendable is true when flags added to the container's args reach
	// vLLM: the command is not a shell script and no bare "--" ends the
	// options.
	appendable bool
	// shell is set when vLLM is started from a `sh -c` script.
	shell bool
	// script locates the vLLM command in that script, for flags to be
	// written into it; nil when there is none.
	script *scriptSpot
	// versionNote says that the vLLM image's tag names no release, so the
	// newest rules were used; "" when it names one or is not vLLM's.
	versionNote string
	// versionFrom says where settings.Version came from (ReleaseFrom...);
	// "" when nothing named it.
	versionFrom string
	// configUnread says why a --config file could not be read (its
	// flags are then not checked); "" when it was, or there is none.
	configUnread string
}

// scriptSpot is where, in a container's `sh -c SCRIPT`, the vLLM command
// is: the script is element index of the container's command (inArgs
// false) or args, the command its bytes [start, end), and flags go at
// byte end of it.
type scriptSpot struct {
	inArgs     bool
	index      int
	text       string
	start, end int
}

// withFlags is the script with flags written after the vLLM command, before
// the blanks that separate it from what follows (`; echo`, a newline, a
// redirection's pipe).
func (s scriptSpot) withFlags(flags []string) string {
	at := s.end
	for at > 0 && (s.text[at-1] == ' ' || s.text[at-1] == '\t' || s.text[at-1] == '\r') {
		at--
	}
	return s.text[:at] + " " + strings.Join(flags, " ") + s.text[at:]
}

// vllmImageRepo is the repository of vLLM's official OpenAI-server image,
// whose entrypoint is the server (`vllm serve` in recent tags, `python3 -m
// vllm.entrypoints.openai.api_server` in older ones), so a container of it
// without a command takes its args as server flags.
const vllmImageRepo = "vllm/vllm-openai"

// splitImage returns an image reference's repository path (registry
// included) and tag; a digest is dropped.
func splitImage(image string) (repo, tag string) {
	ref, _, _ := strings.Cut(image, "@")
	slash := strings.LastIndexByte(ref, '/')
	if colon := strings.LastIndexByte(ref, ':'); colon > slash {
		return ref[:colon], ref[colon+1:]
	}
	return ref, ""
}

// isVLLMImage reports whether image is vLLM's OpenAI-server image from any
// registry or mirror (docker.io/vllm/vllm-openai:v0.9.2, a pull-through
// cache's .../vllm/vllm-openai).
func isVLLMImage(image string) bool {
	repo, _ := splitImage(image)
	return repo == vllmImageRepo || strings.HasSuffix(repo, "/"+vllmImageRepo)
}

// imageVersion reads the vLLM release from a vLLM image's tag (vLLM's
// official image, "v0.9.2", "v0.10.1.1", "0.8.5-cu128", or a vendor's,
// vllm.ReadImage); zero when the tag names none ("latest", "nightly"), and
// the newest known rules apply.
func imageVersion(image string) vllm.Version { return vllm.ReadImage(image).Version }

// shells are the programs whose -c script the webhook looks into.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true}

// serverStart finds where a vLLM server command starts inside a shell
// script: `vllm serve` or `python -m vllm.entrypoints...`, after the start
// of the script or a separator, optionally behind exec.
var serverStart = regexp.MustCompile(`(?:^|[\s;&|(])((?:exec\s+)?(?:\S*/)?(?:vllm\s+serve\b|python[0-9.]*\s+(?:-\S+\s+)*-m\s*vllm\.entrypoints\.))`)

// vllmModules are the Python modules that start vLLM's server.
var vllmModules = []string{"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main"}

// runsVLLM reports whether an argv starts a vLLM server: `vllm serve`, or
// python with -m and one of vLLM's server modules. It looks at the words,
// not at whether they parse, so that a vLLM command with a bad flag is
// reported instead of being taken for some other program.
func runsVLLM(argv []string) bool {
	for i, w := range argv {
		if path.Base(w) == "vllm" && i+1 < len(argv) && argv[i+1] == "serve" {
			return true
		}
		m := strings.TrimPrefix(w, "-m")
		if w == "-m" && i+1 < len(argv) {
			m = argv[i+1]
		}
		if slices.Contains(vllmModules, m) {
			return true
		}
	}
	return false
}

// readLaunch reads a container's vLLM launch. ok is false when the
// container does not run vLLM; err when it does but its flags cannot be
// read (then the caller warns and does not check it). A --config file is
// read with read (nil: not read); one read cannot reach leaves the line
// alone to be checked, and configUnread says why.
func readLaunch(c corev1.Container, read vllm.ConfigReader) (l launch, ok bool, err error) {
	l, ok, err = readLaunchWith(c, read)
	var unread *vllm.ConfigReadError
	if read != nil && errors.As(err, &unread) {
		l, ok, err = readLaunchWith(c, nil)
		l.configUnread = unread.Error()
	}
	return l, ok, err
}

func readLaunchWith(c corev1.Container, read vllm.ConfigReader) (l launch, ok bool, err error) {
	argv := append(slices.Clone(c.Command), c.Args...)
	switch {
	case len(c.Command) > 0 && shells[path.Base(c.Command[0])]:
		at, found := shellScript(argv)
		if !found {
			return launch{}, false, nil
		}
		script := argv[at]
		loc := serverStart.FindStringSubmatchIndex(script)
		if loc == nil {
			return launch{}, false, nil
		}
		words, end, serr := vllm.SplitScriptCommand(script[loc[2]:])
		if err = serr; err == nil {
			l.settings, err = vllm.ParseCommandWith(words, read)
		}
		l.shell = true
		// Flags after a bare "--" would be positional arguments.
		if !slices.Contains(words, "--") {
			spot := scriptSpot{index: at, text: script, start: loc[2], end: loc[2] + end}
			if at >= len(c.Command) {
				spot.inArgs, spot.index = true, at-len(c.Command)
			}
			l.script = &spot
		}
	case runsVLLM(argv):
		l.settings, err = vllm.ParseCommandWith(argv, read)
		l.appendable = !slices.Contains(argv, "--")
	case len(c.Command) == 0 && isVLLMImage(c.Image):
		l.settings, err = vllm.ParseFlagsWith(c.Args, read)
		l.appendable = !slices.Contains(c.Args, "--")
	default:
		return launch{}, false, nil
	}
	if err != nil {
		return launch{}, true, err
	}
	if l.settings.Version.IsZero() {
		img := vllm.ReadImage(c.Image)
		l.settings.Version = img.Version
		if img.VLLM && img.Version.IsZero() {
			l.versionNote = img.Note
		}
		if !img.Version.IsZero() {
			l.versionFrom = ReleaseFromImage
		}
	}
	return l, true, nil
}

// shellScript returns the index in argv of the script of `sh [options] -c
// SCRIPT`.
func shellScript(argv []string) (int, bool) {
	for i := 1; i+1 < len(argv); i++ {
		a := argv[i]
		switch {
		case !strings.HasPrefix(a, "-"):
			return 0, false
		case a == "-o" || a == "+o":
			i++ // -o pipefail: the option's name is not the script
		case !strings.HasPrefix(a, "--") && strings.Contains(a[1:], "c"):
			return i + 1, true
		}
	}
	return 0, false
}

// envOf is the environment vLLM starts with in container c: the launch
// command's assignments, then the container's literal values.
func (l launch) envOf(c corev1.Container) map[string]string {
	return mergeEnv(l.settings.Env, literalEnv(c))
}

// literalEnv returns the container's environment variables that have a
// literal value; values from secrets or fields are unknown here.
func literalEnv(c corev1.Container) map[string]string {
	var env map[string]string
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[e.Name] = e.Value
	}
	return env
}

// hasEnv reports whether the container sets name in any way.
func hasEnv(c corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
