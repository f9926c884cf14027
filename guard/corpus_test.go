package guard

import (
	"strings"
	"testing"
)

// corpusScore is how ToolFailed reads one part of a corpus.
type corpusScore struct {
	fails, caught, oks, flagged int
	missed, wrong               []string // names of failures not caught, of successes flagged
}

// scoreCorpus runs ToolFailed over the files of a txtar corpus whose names
// start with fail/ or ok/, by source: the second and third parts of a
// name ("local/gcc", "github/owner").
func scoreCorpus(t *testing.T, path string) (total corpusScore, bySource map[string]*corpusScore) {
	t.Helper()
	bySource = map[string]*corpusScore{}
	for _, f := range parseTxtar(t, path) {
		side, rest, _ := strings.Cut(f.name, "/")
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 3 || side != "fail" && side != "ok" {
			t.Fatalf("%s: file %q is not named fail|ok/SOURCE/KIND/...", path, f.name)
		}
		src := bySource[parts[0]]
		if src == nil {
			src = &corpusScore{}
			bySource[parts[0]] = src
		}
		got := ToolFailed(f.data)
		for _, s := range []*corpusScore{&total, src} {
			s.add(side == "fail", got, f.name)
		}
	}
	return total, bySource
}

func (s *corpusScore) add(want, got bool, name string) {
	switch {
	case want:
		s.fails++
		if got {
			s.caught++
		} else {
			s.missed = append(s.missed, name)
		}
	default:
		s.oks++
		if got {
			s.flagged++
			s.wrong = append(s.wrong, name)
		}
	}
}

func (s *corpusScore) rate() float64 {
	if s.fails == 0 {
		return 1
	}
	return float64(s.caught) / float64(s.fails)
}

// heldOutTarget is the share of the held-out failures ToolFailed must
// catch, with no exit status to read; no success may be flagged.
const heldOutTarget = 0.96

// TestToolFailedTune: the parts of the corpus without exit status that the
// rules may be written from.
func TestToolFailedTune(t *testing.T) {
	for _, part := range []string{"corpus_tune", "corpus_tune2"} {
		total, by := scoreCorpus(t, "testdata/"+part+".txtar")
		logScore(t, part, total, by)
		checkScore(t, part, total)
		for _, n := range total.missed {
			t.Logf("%s: failure not caught: %s", part, n)
		}
		for _, n := range total.wrong {
			t.Logf("%s: success flagged: %s", part, n)
		}
	}
}

// TestToolFailedHeldOut: outputs of other tools and other threads than
// the tuning part's; no rule was written from them.
func TestToolFailedHeldOut(t *testing.T) {
	total, by := scoreCorpus(t, "testdata/corpus_heldout.txtar")
	logScore(t, "held-out", total, by)
	checkScore(t, "held-out", total)
}

func logScore(t *testing.T, part string, total corpusScore, by map[string]*corpusScore) {
	t.Helper()
	t.Logf("%s: failures caught %d of %d (%.1f%%), successes flagged %d of %d",
		part, total.caught, total.fails, 100*total.rate(), total.flagged, total.oks)
	for name, s := range by {
		t.Logf("%s, %s: failures caught %d of %d, successes flagged %d of %d", part, name, s.caught, s.fails, s.flagged, s.oks)
	}
}

func checkScore(t *testing.T, part string, s corpusScore) {
	t.Helper()
	if s.fails < 60 || s.oks < 20 {
		t.Errorf("%s: %d failures and %d successes; want at least 60 and 20", part, s.fails, s.oks)
	}
	// The names of the held-out part's misses are not shown: a rule
	// written from them would make it a tuning part.
	if s.rate() < heldOutTarget {
		t.Errorf("%s: %.1f%% of failures caught, want at least %.0f%%", part, 100*s.rate(), 100*heldOutTarget)
	}
	if s.flagged > 0 {
		t.Errorf("%s: %d successes flagged", part, s.flagged)
	}
}

// TestToolFailedHeldOut2: a second held-out batch, built before the rules
// of its round were read and measured once on them (85.3% of failures
// caught, no success flagged); spent since, its misses read while writing
// that round's rules.
func TestToolFailedHeldOut2(t *testing.T) {
	total, by := scoreCorpus(t, "testdata/corpus_heldout2.txtar")
	logScore(t, "held-out 2", total, by)
	if total.fails < 150 || total.oks < 100 {
		t.Errorf("held-out 2: %d failures and %d successes; want at least 150 and 100", total.fails, total.oks)
	}
	checkScore(t, "held-out 2", total)
}

// TestToolFailedHeldOutBatches: the held-out batches built round after
// round, each from tools and threads none of the rules then was written
// from, each measured once (its first figure below). A batch whose misses
// were read since is spent: it keeps its size and what it flags.
func TestToolFailedHeldOutBatches(t *testing.T) {
	for _, b := range []struct {
		name             string
		minFails, minOKs int
		maxFlagged       int
		// unmeasured: built and not yet measured; its figures are only
		// logged until its one measure sets its bounds.
		unmeasured bool
	}{
		// Built after the rules of its round were written. Measured once:
		// 48 of 70 failures caught (68.6%; the rules before that round
		// caught 46), no success flagged. Spent: its misses were read
		// while writing the next round's rules.
		{"heldout3", 60, 50, 0, false},
		// Built after the second round of rules was written. Measured
		// once: 52 of 64 failures caught (81.2%; the first round's rules
		// caught 47, the rules before both rounds 43), no success flagged.
		{"heldout4", 60, 40, 0, false},
		// Built after the third round. Measured once: 40 of 55 caught
		// (72.7%; the second round's rules caught 41, the first round's
		// 35, the rules before the rounds 35), 0 of 49 successes flagged.
		{"heldout5", 50, 45, 0, false},
		// Built after the fourth round. Measured once: 30 of 34 caught
		// (88.2%; the third round's rules caught 29, the rules before the
		// rounds 21), 0 of 27 successes flagged.
		{"heldout6", 30, 25, 0, false},
		// Built before the fifth round of rules was written, from the tool
		// families the other parts hold least of (terraform, Maven, the
		// JDK's tools, gpg, openssl, compressors, system tools) and
		// threads none of them quotes. Measured once before that round: 81
		// of 93 caught (87.1%), 2 of 75 successes flagged. Its misses and
		// the flagged successes were not read: no rule is written from it,
		// and what that measure flagged is a bound the rules must not
		// exceed (the aim, as everywhere, is none).
		{"heldout7", 60, 60, 2, false},
		// Built before the fifth round, from tool families none of the
		// other parts holds (LLVM, the JDK's keytool/javap/jarsigner,
		// Perl's prove, gettext, PostgreSQL's client programs, Debian's
		// packaging tools, systemd-analyze) and threads none of them
		// quotes (rake, helm, CMake); measured once, after that round: 55
		// of 64 caught (85.9%; the rules before the round caught 52), 1 of
		// 45 successes flagged (the rules before flagged none). Spent:
		// that success (pgbench's "number of failed transactions: 0") was
		// read, and a labelled count of zero now says nothing failed.
		{"heldout8", 40, 40, 0, false},
		// Built before the learned scorer of the sixth round was written,
		// from tool families the other parts hold least of or not at all
		// (the AWS CLI against a local server, cfn-lint, kubectl without a
		// cluster, gcloud, clippy and rustfmt, naga, JSON Schema and
		// OpenAPI validators, docutils, the JDK's javadoc and jlink,
		// PostgreSQL's server programs, e2fsprogs, ICU, groff, flask,
		// headless chromium) and threads none of them quotes (Bazel, Deno,
		// dotnet, Zig, Flutter), before a learned scorer was tried.
		// Measured once: 72 of 89 caught (80.9%), 1 of 74 successes
		// flagged, by these rules and by the rules with the scorer alike
		// (the scorer added no failure; it was left out, see
		// BENCHMARKS.md). Spent since: its misses and the flagged success
		// were read while writing the seventh round's rules (a log's clock
		// or level before each line, glog's records, JSON Schema's
		// messages, a checker's codes, botocore's "An error occurred",
		// a Windows path before a compiler's error, a JSON array of log
		// lines as data); it now flags none.
		{"heldout9", 80, 70, 0, false},
		// Built before the seventh round of rules was written and before
		// the ninth batch's misses were read, from tools no other part
		// names (Go's analysis tools, rustdoc, Python's JSON tools,
		// libcst, Python 2.7, GLib and GTK tools, tzcode, libwww-perl,
		// nftables, libcap, and new tools of the JDK, Perl, binutils,
		// LLVM, ICU, gettext, groff, util-linux, GnuPG) and threads none
		// of them quotes (cabal, dune, Julia, Nix, Rscript, rebar3).
		// Measured once, after that round: 71 of 101 failures caught
		// (70.3%; the rules before the round caught 70), 10 of 94
		// successes flagged (the rules before: the same 10, compared by a
		// digest of their names). Spent since: its misses and the flagged
		// successes were read while writing the eighth round's rules (a
		// status line with its headers, a parser's complaint about a
		// line, a place and what failed there, a linker's undefined
		// reference, a synopsis alone, "Error creating …", an unknown
		// thing, a thing not found, a program's warning, a row of
		// columns); it now catches 96 and flags 10, seven of them outputs
		// that print an error and exit 0 (see docs/guard-and-recall.md).
		{"heldout10", 100, 90, 10, false},
		// Built before the eighth round of rules was written and before
		// the tenth batch's misses were read, from tools no other part
		// names (Python's standard modules run as tools, X11 clients
		// without a display, D-Bus, Avahi, polkit, systemd's clients,
		// procps, psmisc, net-tools, dpkg's and apt's helpers, new tools
		// of LLVM, ICU, gettext, coreutils, binutils, e2fsprogs, glibc,
		// groff, valgrind) and threads of families none of them quotes
		// (conda, Dart's pub, Conan, LuaRocks, pipenv, Vagrant,
		// Leiningen, SCons). Measured once, after that round: 119 of 144
		// failures caught (82.6%; local tools 106 of 126, threads 13 of
		// 18; the rules before the round caught 117, and the two more
		// are the only difference, compared by a digest of the names),
		// 11 of 100 successes flagged (the rules before: 10, the same ten
		// among the eleven). Spent since: its misses and the flagged
		// successes were read while writing the ninth round's rules (a
		// complaint then the synopsis, a shell's report of a script's
		// line, a file not in a format or not opened, com_err's "while
		// opening", two names of one file, a value that must be given,
		// what was expected against what came, a thing not available,
		// a make-like driver's target error, a heavy ballot X, nothing
		// usable found, an exception after a progress line, compileall's
		// last line, ed's question mark, err(3)'s "PROG: OBJECT:
		// Message"; a record's "E: KEY=VALUE" and a warning's missing
		// file are no failure); it now catches 139 and flags 9, all of
		// them outputs that print an error and exit 0 (see
		// docs/guard-and-recall.md).
		{"heldout11", 140, 100, 9, false},
		// Built before the ninth round of rules was written and before
		// the eleventh batch's misses were read, from tools no other
		// part names (shadow's user and group tools, debconf, man-db,
		// device-mapper, FUSE, PackageKit, moto, OpenSSH's agent tools,
		// git's scalar, fontconfig, gdk-pixbuf, Python's standard
		// modules not run before, util-linux's IPC and scheduling
		// tools, iproute2's bridge, genl and nstat, the compressors'
		// wrappers, systemd's journalctl, timedatectl and their
		// siblings) and threads of families none of them quotes (Meson,
		// CocoaPods, opam, Hugo, Jekyll, MkDocs, Sphinx, Podman,
		// Hardhat, Terragrunt, PDM). Measured once, after that round: 96
		// of 119 failures caught (80.7%; local tools 81 of 89, threads 15
		// of 30), 8 of 97 successes flagged; the rules the round started
		// from caught the same 96 and flagged the same 8 (compared by a
		// digest of the names): the round's rules added nothing here.
		// Spent since: its misses were read while writing the tenth
		// round's rules (a build file's "ERROR:", an error named by its
		// code, a tool that says it encountered an error, an error
		// banner, a tool's version then its error, a module's exception
		// at the end of a cut traceback); it now catches 104 and flags
		// the same 8. What is left: CocoaPods' "[!]" lines, opam's
		// report box, an MkDocs log record, systemd's journal, and local
		// tools that say "nothing appropriate" or "no identities".
		{"heldout12", 115, 95, 8, false},
		// Built while the tenth round was written, by hands that never
		// read a rule, from 141 tools no other part names (Go's tools
		// run through `go tool`, PostgreSQL's server tools against a
		// scratch cluster, the other Python versions running small
		// scripts, Perl's and dpkg-dev's scripts, the JDK's new tools,
		// D-Bus, X11, iptables' translators, scripts run by their own
		// names) and threads of families none of them quotes (Gatsby,
		// Angular, Vite, Packer, JitPack, fastlane, Serverless, Godot,
		// the AWS CDK, Stack, Elm, Prisma, wasm-pack, Alembic, dbt, uv,
		// Tauri, Capacitor). Measured once, after that round: 99 of 140
		// failures caught (70.7%; local tools 80 of 106, threads 19 of
		// 34), 10 of 99 successes flagged; the rules before the round
		// the same 99 and 10 (compared by a digest of the names). Spent
		// since: its misses and the flagged successes were read while
		// writing the eleventh round's rules (Go's flag package, an error
		// in the command line, "[error]" first, an unknown signal, Go's
		// io.EOF, a line that failed to parse, a diagnostic about the
		// standard input or an X tool's command line, a file's line that
		// opens with what is wrong there, a count of broken things found,
		// a run that ended with errors or did not complete successfully,
		// unsatisfiable requirements, a failure's error code, a
		// framework's error box, Elm's error heading, a helper not
		// installed, "Error: [tag]"); it now catches 121 and flags the
		// same 10, all of them outputs that print an error and exit 0.
		{"heldout13", 135, 95, 10, false},
		// Built while the eleventh round was written, by hands that never
		// read a rule, from tools no other part names (Graphviz,
		// ImageMagick, SoX, pandoc, Texinfo, aspell, hunspell, xmllint,
		// xsltproc, tidy, shellcheck, yamllint, Ruby, Lua, PHP, gawk,
		// bison, flex, cpio, pax, 7z, rsync, CMake, CTest, Ninja, Meson,
		// busybox, dc, ltrace) and threads of projects none of them
		// quotes (pandoc, Graphviz, Ninja, xmllint, yamllint,
		// ImageMagick, rsync, SoX, Lua). Measured once, after that round:
		// 114 of 170 failures caught (67.1%; local tools 97 of 140,
		// threads 17 of 30), 8 of 112 successes flagged; the rules the
		// round started from caught the same 114 and flagged the same 8
		// (compared by a digest of the names): the round's rules added
		// nothing here. Its misses and the flagged successes were not
		// read. The failure model, never trained on it, caught 10 more
		// (124 of 170, 72.9%) and flagged none; trained on the sixteenth
		// and seventeenth batches too, 11 more (125) and none. The rules
		// read from the twentieth batch catch one more of it alone (115;
		// with the model 124).
		{"heldout14", 165, 105, 8, false},
		// Built while the failure model was written, by hands that never
		// read a rule nor the model, from tools no other part names (the
		// Python checkers mypy, flake8, pylint, black, isort,
		// pycodestyle, pydocstyle and bandit; cppcheck, clang-tidy, nasm,
		// gfortran, Icarus Verilog, Verilator, Erlang, GHC, Guile, SBCL,
		// gnuplot; qpdf, poppler, Ghostscript, FFmpeg, ExifTool, optipng,
		// pngcheck, jpegoptim, gifsicle, flac, lame, XMLStarlet, Miller,
		// datamash, csvkit, dos2unix, enscript, chktex, units, sassc,
		// qrencode, zbarimg; npm's tsc, ESLint, Prettier, Stylelint and
		// HTMLHint) and threads of projects none of them quotes. Measured
		// once, after the model was trained and its threshold chosen:
		// 211 of 282 failures caught (74.8%; local tools 189 of 251,
		// threads 22 of 31), 24 of 146 successes flagged; the rules
		// alone 200 and the same 24. With the model trained on the
		// sixteenth and seventeenth batches too: 212, the same 24. Its
		// misses and the flagged successes were not read.
		{"heldout15", 280, 140, 24, false},
		// Built, as the next two, after the failure model was written, by
		// hands that never read a rule nor the model, from tools no other
		// part names: compilers and interpreters of languages (Free
		// Pascal, GNAT, GnuCOBOL, Mono, Vala, GDC, tcc, CLISP,
		// SWI-Prolog, Gforth, Elixir, R, Racket, Groovy, Scala, Kotlin)
		// and threads of projects none of them quotes. Measured once with
		// the model trained up to the thirteenth batch: 173 of 225
		// failures caught (the rules alone 172), 15 of 140 successes
		// flagged (the rules alone 14). A training part of the model
		// since.
		{"heldout16", 225, 140, 14, false},
		// From servers' configuration checks and administration tools
		// (nginx, Apache, HAProxy, BIND, Postfix, sshd, Squid, lighttpd,
		// Redis, Mosquitto, Varnish, dnsmasq, Unbound, visudo, logrotate,
		// crontab, Ansible, lintian, desktop-file-validate,
		// checkbashisms, the autotools). Measured once as the sixteenth:
		// 237 of 322 caught (the rules alone 217), 15 of 148 flagged (the
		// rules alone 14). A training part of the model since.
		{"heldout17", 320, 145, 14, false},
		// From JavaScript's build and test tools and markup tools (npm's
		// esbuild, rollup, terser, uglify-js, Babel, JSHint, standard,
		// CoffeeScript, Less, Stylus, Pug, Handlebars, SVGO,
		// markdownlint, ajv, jsonlint, textlint, commitlint, js-yaml,
		// Mocha, AVA; Asciidoctor, mandoc, cmark, xmlto, DocBook).
		// Measured once as the sixteenth: 209 of 272 caught (the rules
		// alone 202), 8 of 139 flagged (the rules alone 6); then with the
		// model trained on the sixteenth and seventeenth too, its
		// threshold chosen without it: 210 caught, 7 flagged; with the
		// model trained on the programs' help and errors too (averaged
		// weights, corpus_flags): 216 caught, 8 flagged. Its misses and
		// flags were not read.
		{"heldout18", 270, 135, 8, false},
		// Built last, the same way, from PHP's tools (composer, phpunit,
		// phpcs, phpcbf), Perl's (perlcritic, perltidy), Ruby's (rake,
		// bundler, rdoc, ri), OCaml's (ocaml, ocamlc, ocamlfind, dune),
		// MariaDB's clients against a scratch server, Ant, Gradle and
		// cabal. Measured once, with the model as trained now: 144 of
		// 201 caught (the rules alone 140), 7 of 101 flagged (the rules
		// alone 6); with the model trained on the programs' help and
		// errors too, 145 and 7. Its misses and flags were not read.
		{"heldout19", 200, 100, 7, false},
		// Built after the failure model was trained on the programs' help
		// and errors, the same way, from code generators, interface
		// compilers, documentation builders and less common languages
		// (protoc, flatc, thrift, capnp, SWIG, re2c, gperf, Doxygen,
		// bmake, premake4, Coq, Clojure, CHICKEN Scheme, Haxe, Pike) and
		// threads of their projects. Measured once: 138 of 223 failures
		// caught by the rules alone (61.9%), 10 of 107 successes flagged;
		// with the model before that training 140 and 10, with the model
		// as trained now 141 and 10. A variant that read a compiler's
		// "file:3:12: message" as a message instead of data was then
		// measured on it too (the same 141, 14 flagged) and left out.
		// Spent since: its misses were read, and a compiler error's
		// place may now hold a range of columns or lines (capnp's
		// "x.capnp:2:18-21: error:", the GNU coding standards' "12.1-14.3");
		// it now catches 148 (the rules alone 145) and flags the same 10.
		// What is left: a compiler's "file:3:5: message" with no word of
		// error (protoc), which a grep hit with a column can look like,
		// Lua's and Haxe's "file:3: message", and tools' own phrasing.
		{"heldout20", 220, 105, 10, false},
		// Built beside the twentieth, from version control other than git
		// (Mercurial, Subversion, fossil, quilt), etcd, Prometheus'
		// promtool and amtool, exim and Dovecot's checks, nmap, socat,
		// ClamAV, lynis, fail2ban, AppArmor, filesystem tools on image
		// files (btrfs-progs, xfsprogs, parted, sfdisk, mdadm),
		// tesseract, rsvg-convert and OpenSCAD. Measured once: 150 of
		// 210 caught by the rules alone (71.4%), 20 of 117 flagged; with
		// the model before 154 and 22, as trained now 154 and 21.
		// Spent since, with the twenty-second and twenty-third: their
		// misses were read, and the rules now read Mercurial's "abort:",
		// Subversion's "svn: E155007:", logrus' "level=fatal" and
		// "FATA[0000]", "File not found: x", a need of root privileges,
		// "unrecognised" as "unrecognized", and a complaint about an
		// argument before the synopsis ("Unknown option: x", then
		// "Usage:"): 162 caught (the rules alone 158), 22 flagged (mdadm's
		// "Unrecognised md component device", printed at exit 0).
		{"heldout21", 210, 115, 22, false},
		// Built after the twentieth's misses were read, the same way,
		// from container tools that run none (skopeo, umoci,
		// oci-image-tool, LXC's and LXD's clients, Charliecloud, conmon,
		// toolbox, distrobox), configuration management (CFEngine,
		// Augeas, facter, reclass) and RPM's tools (rpmbuild, rpm,
		// rpmspec, rpmkeys, rpmsign, rpmlint, alien, createrepo_c, dnf,
		// zypper, osc). Measured once: 151 of 210 caught (the rules alone
		// 144; the model before the programs' help the same 151), 6 of
		// 108 flagged (the same 6 each). Spent since (see the
		// twenty-first): 173 caught (the rules alone 166), the same 6
		// flagged; 17 of the 21 more are logrus' fatal records (skopeo,
		// oci-image-tool).
		{"heldout22", 210, 105, 6, false},
		// Built beside the twenty-second, from computer algebra (Maxima,
		// GAP, PARI/GP), music engraving and synthesis (LilyPond and its
		// converters, abcm2ps, abcMIDI, FluidSynth, TiMidity++, Csound),
		// PDF, DjVu and e-book tools (mutool, pdftk, pdfgrep, img2pdf,
		// DjVuLibre, pdf2djvu, EPUBCheck). Measured once: 160 of 200
		// caught (the rules alone 159; the model before the same 160),
		// 35 of 127 flagged (the rules alone 32, the model before 34).
		// A model trained on the twentieth and twenty-first batches too
		// was measured on both beside it: 150 and 161, the same flags;
		// not adopted. Spent since (see the twenty-first): 162 caught
		// (the rules alone 161), the same 35 flagged; 36 since the rules
		// read from the twenty-fourth and twenty-fifth batches' misses
		// (GAP's "Unrecognised command line option", which it ignores).
		{"heldout23", 200, 125, 36, false},
		// The tools coding agents run most, on purpose from families the
		// other batches name, with new cases, in small projects worked on
		// as an agent would: a Python package (pytest, pip offline, mypy,
		// flake8, pylint, python -m), a Node/TypeScript one (node, npm,
		// tsc, eslint, node --test), a Go module (go build, test, vet,
		// mod tidy, gofmt), git, make, sqlite3, curl, grep, sed, find,
		// ls and cat around them, and threads of those projects. Built
		// while the twenty-first to twenty-third batches' misses were
		// read, measured once after: 188 of 209 caught (90.0%; the rules
		// alone the same 188, and the rules before that round too), 10 of
		// 107 flagged (the rules alone 8). Spent since: its flags were
		// read, and the success verdicts of mypy, Maven, Gradle, RSpec,
		// minitest and CTest at the end of an output now decide: 9
		// flagged. Its misses and the twenty-fifth's were read too:
		// PHPUnit's and CTest's summaries, pytest's "no tests ran", Ruby's
		// exceptions from <internal:…> and Errno's, patch's ignored
		// hunks, "CMake Error: …", git pull without tracking, pip's
		// "Package(s) not found", Symfony's console ("In X.php line 3:",
		// composer), ESLint's crash banner, java -jar without a main
		// class, sqlite3's .import, "Unknown command: x" (npm,
		// systemctl), Go's "cannot find module providing package": 198
		// caught, the twenty-fifth 188; batches 7, 14, 15, 19 and 20 one
		// to six more each.
		{"heldout24", 200, 100, 9, false},
		// Beside the twenty-fourth, the same way: a Rust crate (cargo,
		// rustc, clippy, rustfmt; crates.io unreachable), a Java one
		// (javac, java, jar, Maven and Gradle offline), C and C++ (GCC,
		// Clang, CMake, CTest, make, Valgrind, the sanitizers), Ruby
		// (rake, RSpec, minitest), PHP (php -l, composer, PHPUnit), and
		// the shell and data tools around them (bash scripts, ShellCheck,
		// jq, yq, tar, zip, diff, patch, the docker CLI with no daemon,
		// systemctl, journalctl, psql with no server). Measured once: 177
		// of 198 caught (89.4%; the rules alone 176, the rules before the
		// round the same), 14 of 100 flagged (the rules alone 9). Spent
		// since (see the twenty-fourth): 10 flagged.
		{"heldout25", 190, 95, 10, false},
		// Built while the twenty-fourth's and twenty-fifth's misses were
		// read, the same way, in other new projects: a WSGI service in
		// Python with SQLite migrations (pytest, coverage, mypy, black,
		// isort, flake8), a TypeScript HTTP API (vitest, jest, node
		// --test, tsc, prettier, eslint, npm), a Go CLI (go build, test
		// -race and -cover, generate, mod, staticcheck, golangci-lint),
		// git, make, docker and docker-compose with no daemon, curl,
		// wget, sqlite3, psql with no server, ssh, tar. Measured once:
		// 201 of 221 caught (91.0%; the rules alone 199; the rules and
		// model before this round's three readings 195), 13 of 119
		// flagged (the rules alone 12; before the same 13). Spent since:
		// its misses and the twenty-seventh's were read, and the rules
		// now read Go's diagnostics on Windows paths (".\main.go:71:2:
		// undefined: x"), "go mod tidy: error …" and "unknown revision",
		// ShellCheck's marks with a closing caret ("^---^ SC2046"),
		// "exiting with code 1" (vitest), pytest's "13 deselected in
		// 0.05s" (it exits 5), Prettier's "Code style issues found",
		// coverage's "Coverage failure", a rebase's unresolved
		// conflicts, gpg's "BAD signature", awk's "fatal:", ssh's "Load
		// key …:", isort's "Broken 1 paths", gdb's "Undefined command",
		// "Unknown shell", a need of privileges, and any Ruby exception
		// class at the end of its frame: 213 caught (the rules alone
		// the same); the twenty-seventh 212 (210); batches 7, 14, 15, 17,
		// 19, 23 and 24 one to three more each.
		{"heldout26", 210, 110, 13, false},
		// Beside the twenty-sixth: a Rust CLI and workspace (cargo,
		// clippy, rustfmt), a Maven and a Gradle multi-module library, C
		// and C++ with CMake presets, CTest, sanitizers, gdb and strace,
		// a Ruby gem (rake, RSpec, bundler), a PHP package (PHPUnit,
		// composer), and shell and ops tools (bash scripts, ShellCheck,
		// bats, jq, yq, sed, awk, find, xargs, rsync, systemctl,
		// crontab, openssl, ssh-keygen, gpg). Measured once: 201 of 230
		// caught (87.4%; the rules alone 199; before the round 191), 19
		// of 111 flagged (the rules alone 17; before 20). Spent since
		// (see the twenty-sixth): 212 caught, the same 19 flagged.
		{"heldout27", 220, 105, 19, false},
		// Built while the twenty-sixth's and twenty-seventh's misses were
		// read, the same way, in other new projects: a Django app, a
		// pandas and SQLAlchemy pipeline with Alembic migrations and
		// notebooks run by nbconvert, an npm, pnpm and yarn monorepo
		// built by tsc, esbuild, Vite and webpack and tested by Mocha,
		// and git around them. Measured once: 178 of 206 caught (86.4%;
		// the rules alone 174; the rules and model after the readings of
		// batches 21 to 25 174, at the session's start 170), 8 of 106
		// flagged (the same 8 each). Spent since: its misses and the
		// twenty-ninth's were read, and the rules now read Ansible's
		// "ERROR! …", Mocha's "Exception during run:", pnpm's
		// "ERR_PNPM_…", Alembic's "FAILED: …", yamllint's errors, yarn's
		// closing "info Visit https://yarnpkg.com/…" (printed after an
		// error only), Meson's test summary, a module-qualified exception
		// near the end ("sqlalchemy.exc.OperationalError: …"), webpack-cli's
		// errors, docker-compose's "Missing mandatory value", git diff
		// --check's "trailing whitespace." and "Unit x not found.": 190
		// caught (the rules alone 187), the twenty-ninth 204 (201), the
		// same flags; batches 14, 16, 17 and 18 two to six more each.
		{"heldout28", 200, 100, 8, false},
		// Beside the twenty-eighth: a Go service with a Makefile and a
		// Dockerfile, a Rust library with features, doc tests and
		// examples, a Maven and a Gradle service, C built by autotools
		// and by Meson and Ninja, and infrastructure (ansible-playbook,
		// docker-compose, yamllint, kubectl with no cluster, nginx -t,
		// openssl, crontab, systemd-analyze, git hooks). Measured once:
		// 190 of 217 caught (87.6%; the rules alone 186; after batches 21
		// to 25 189, at the session's start 188), 10 of 115 flagged (the
		// rules alone 9; after 21 to 25 10, at the start 13). Spent
		// since (see the twenty-eighth): 204 caught, the same 10 flagged.
		{"heldout29", 210, 110, 10, false},
		// Built while the twenty-eighth's and twenty-ninth's misses were
		// read, the same way, in other new projects: a Python CLI and
		// library packaged with pyproject.toml (pytest with hypothesis,
		// doctest, mypy --strict, pylint, black, python -m build, pip
		// offline, a pre-commit hook), strict TypeScript CLIs (tsc, tsx,
		// ts-node, node --test, vitest, npm pack, version, a broken lock
		// file), a Go library of generic interval sets with benchmarks,
		// fuzz tests, examples and a go.work workspace, and git. Measured
		// once: 220 of 236 caught (93.2%; the rules alone the same; with
		// the readings of batches 21 to 27 only, the same 220; at the
		// session's start 214), 10 of 110 flagged (at the start 12). Its
		// misses and flags were not read.
		{"heldout30", 230, 105, 10, false},
		// Beside the thirtieth: a Rust parser crate (benches, build.rs
		// failures, cargo doc), a C++17 library with a Makefile and a
		// CMake and CTest project (templates, linker errors, sanitizers),
		// Java with JUnit 4 through JUnitCore, Perl (perl -c, prove) and
		// Lua (lua, luac -p), and the shell work around them (make -k and
		// -n, git bisect and apply, diff and patch, tar, env -i, timeout,
		// ulimit). Measured once: 186 of 201 caught (92.5%; with the
		// readings of 21 to 27 only the same; at the start 179), 16 of
		// 109 flagged (the rules alone 15; the same at the start). Its
		// misses and flags were not read.
		{"heldout31", 195, 105, 16, false},
	} {
		t.Run(b.name, func(t *testing.T) {
			total, by := scoreCorpus(t, "testdata/corpus_"+b.name+".txtar")
			logScore(t, b.name, total, by)
			if b.unmeasured {
				return
			}
			if total.fails < b.minFails || total.oks < b.minOKs {
				t.Errorf("%s: %d failures and %d successes; want at least %d and %d", b.name, total.fails, total.oks, b.minFails, b.minOKs)
			}
			if total.flagged > b.maxFlagged {
				t.Errorf("%s: %d successes flagged, want at most %d", b.name, total.flagged, b.maxFlagged)
			}
		})
	}
}

// TestToolFailedTune3: successes that speak of errors (a tuning part: rules
// may be written from it); none may be flagged.
func TestToolFailedTune3(t *testing.T) {
	total, by := scoreCorpus(t, "testdata/corpus_tune3.txtar")
	logScore(t, "corpus_tune3", total, by)
	if total.oks < 30 {
		t.Errorf("corpus_tune3: %d successes; want at least 30", total.oks)
	}
	for _, n := range total.wrong {
		t.Errorf("corpus_tune3: success flagged: %s", n)
	}
}
