/*
 * test_install.c - what `meson install` and deploy/build-deb.sh deliver, on
 * the build under test ($NATSYNC_BUILD_ROOT): installed into a DESTDIR, the
 * programs answer --version (the project's version) and --help, every man
 * page renders with man -l, the systemd units pass systemd-analyze verify
 * without a warning, and the example configuration sits where the units
 * and scripts look and is valid for the installed programs. Then the
 * Debian package (root): built, without a lintian error or a program
 * lacking a hardening flag, installed with dpkg -i, natsync-agent
 * --version from /usr/bin, dpkg -L, and purged again (even when a check
 * fails), leaving none of the paths it added.
 *
 * systemd is not PID 1 here (nor on CI): the units are verified with
 * --root on a copy of the DESTDIR that also holds this machine's system
 * units (the targets the units name), so that ExecStart= paths resolve to
 * the installed programs and Documentation=man: pages to the installed
 * man pages (MANPATH).
 *
 * The hardening the units state is tried too, without systemd: the
 * installed agent (kernel source, conntrack standby, in a namespace) and
 * gateway (af_packet ports) run on the installed examples in the sandbox
 * tests/nst_unit_sandbox.sh builds from the installed unit files, and
 * fail, as they should, with an empty capability bounding set.
 *
 * Suite install, not in the sanitizer runs: it checks files, packaging
 * and privileges, not code paths.
 */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nst_skip.h"
#include "nst_store.h"

static const char *const programs[] = {
	"natsync-agent", "natsync-gateway", "natsync-verify",
	"natsync-bench", "natsync-gwbench", "natsync-ctbench",
};
#define N_PROGRAMS (sizeof(programs) / sizeof(programs[0]))

/* Where the build under test installs, from meson introspect. */
static struct {
	char prefix[256], bindir[256], sysconfdir[256], mandir[256],
		libexecdir[256], datadir[256], unitdir[300];
	char destdir[512];
} in;

/* Run a shell command with stderr into stdout; its output (malloc'd, at
 * most 64 KiB) and exit status. */
static char *capture(int *status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static char *capture(int *status, const char *fmt, ...)
{
	char cmd[8192];
	size_t cap = 65536, n = 0;
	char *out = malloc(cap);
	va_list ap;
	FILE *p;
	int rc;

	cr_assert_not_null(out);
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd) - 8, fmt, ap);
	va_end(ap);
	strcat(cmd, " 2>&1");
	p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	while (n < cap - 1) {
		size_t got = fread(out + n, 1, cap - 1 - n, p);

		if (got == 0)
			break;
		n += got;
	}
	out[n] = 0;
	rc = pclose(p);
	*status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
	return out;
}

/* The prefix and the directory options of the build under test, each
 * absolute: one meson introspect for all (each costs about 0.6 s of CPU,
 * and every test of the suite installs). */
static void install_dirs(void)
{
	char *dirs[] = {in.bindir, in.sysconfdir, in.mandir, in.libexecdir,
			in.datadir};
	char *out, *line, *save = NULL;
	int rc;

	out = capture(&rc,
		      "meson introspect --buildoptions '%s' | python3 -c '"
		      "import json, sys; o = {o[\"name\"]: o[\"value\"] for o "
		      "in json.load(sys.stdin)}; print(\"\\n\".join(o[n] for n "
		      "in (\"prefix\", \"bindir\", \"sysconfdir\", "
		      "\"mandir\", \"libexecdir\", \"datadir\")))'",
		      nst_build(""));
	cr_assert_eq(rc, 0, "meson introspect: exit %d: %s", rc, out);
	line = strtok_r(out, "\n", &save);
	cr_assert(line && line[0] == '/', "no prefix: %s", out);
	snprintf(in.prefix, sizeof(in.prefix), "%s", line);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		line = strtok_r(NULL, "\n", &save);
		cr_assert_not_null(line, "%zu directories only", i);
		if (line[0] == '/')
			snprintf(dirs[i], sizeof(in.bindir), "%s", line);
		else
			cr_assert_lt(snprintf(dirs[i], sizeof(in.bindir),
					      "%s/%s", in.prefix, line),
				     (int)sizeof(in.bindir));
	}
	free(out);
}

static int exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int exists(const char *fmt, ...)
{
	char path[1024];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return stat(path, &st) == 0;
}

/* Install the build under test into a fresh DESTDIR. */
static void install_into_destdir(void)
{
	int rc;
	char *out;

	install_dirs();
	/* As deploy/meson.build picks it. */
	out = capture(&rc, "pkg-config --variable=systemdsystemunitdir "
			   "systemd");
	out[strcspn(out, "\n")] = 0;
	if (rc == 0 && out[0] == '/')
		snprintf(in.unitdir, sizeof(in.unitdir), "%s", out);
	else
		snprintf(in.unitdir, sizeof(in.unitdir),
			 "%s/lib/systemd/system", in.prefix);
	free(out);
	snprintf(in.destdir, sizeof(in.destdir), "%s/destdir",
		 nst_run_dir_make("install"));
	out = capture(&rc, "meson install -C '%s' --no-rebuild --destdir '%s'",
		      nst_build(""), in.destdir);
	cr_assert_eq(rc, 0, "meson install: exit %d:\n%s", rc, out);
	free(out);
}

TestSuite(install, .init = install_into_destdir);

Test(install, destdir_holds_programs_man_pages_units_and_examples)
{
	static const char *const examples[] = {
		"gateway.example.ini",	      "kernel-active.example.ini",
		"kernel-standby.example.ini", "redis-users.acl.example",
		"keepalived.conf.example",    "keepalived-kernel.conf.example",
		"natsync-defer.nft",
	};
	static const char *const scripts[] = {
		"keepalived-notify.sh",
		"keepalived-kernel-notify.sh",
		"keepalived-track.sh",
		"hugepages.sh",
	};
	const char *d = in.destdir;

	for (size_t i = 0; i < N_PROGRAMS; i++) {
		cr_expect(exists("%s%s/%s", d, in.bindir, programs[i]),
			  "%s%s/%s missing", d, in.bindir, programs[i]);
		cr_expect(exists("%s%s/man1/%s.1", d, in.mandir, programs[i]),
			  "man page of %s missing", programs[i]);
	}
	/* Test traffic for the benchmark scripts: not installed. */
	cr_expect(!exists("%s%s/natsync-kflows", d, in.bindir));
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++)
		cr_expect(exists("%s%s/natsync/%s", d, in.sysconfdir,
				 examples[i]),
			  "%s%s/natsync/%s missing", d, in.sysconfdir,
			  examples[i]);
	for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
		cr_expect_eq(nst_sh("test -x '%s%s/natsync/%s'", d,
				    in.libexecdir, scripts[i]),
			     0, "%s not installed executable", scripts[i]);
	/* hugepages.sh sources it from its own folder. */
	cr_expect(exists("%s%s/natsync/lib.sh", d, in.libexecdir));
	cr_expect(exists("%s%s/natsync/grafana/natsync-dashboard.json", d,
			 in.datadir));
	cr_expect(exists("%s%s/natsync-gateway.service", d, in.unitdir));
	cr_expect(exists("%s%s/natsync-agent@.service", d, in.unitdir));
	/* The skeleton embeds the BPF object: no .bpf.o to install. */
	cr_expect_eq(nst_sh("test -z \"$(find '%s' -name '*.bpf.o')\"", d), 0);
}

Test(install, programs_answer_version_and_help)
{
	for (size_t i = 0; i < N_PROGRAMS; i++) {
		char want[128];
		int rc;
		char *out;

		/* natsync's own libraries are static: no LD_LIBRARY_PATH. */
		out = capture(&rc, "'%s%s/%s' --version", in.destdir, in.bindir,
			      programs[i]);
		snprintf(want, sizeof(want), "%s %s\n", programs[i],
			 NATSYNC_VERSION);
		cr_expect_eq(rc, 0, "%s --version: exit %d", programs[i], rc);
		cr_expect_str_eq(out, want);
		free(out);
		out = capture(&rc, "'%s%s/%s' --help", in.destdir, in.bindir,
			      programs[i]);
		cr_expect_eq(rc, 0, "%s --help: exit %d", programs[i], rc);
		cr_expect(strstr(out, programs[i]) != NULL,
			  "%s --help does not name it:\n%s", programs[i], out);
		free(out);
	}
}

Test(install, man_pages_render)
{
	for (size_t i = 0; i < N_PROGRAMS; i++) {
		char name_line[128];
		int rc;
		char *out = capture(&rc, "MANWIDTH=80 man -l '%s%s/man1/%s.1'",
				    in.destdir, in.mandir, programs[i]);

		snprintf(name_line, sizeof(name_line), "\n       %s - ",
			 programs[i]);
		cr_expect_eq(rc, 0, "man -l %s.1: exit %d", programs[i], rc);
		cr_expect(strstr(out, "\nNAME\n") != NULL,
			  "%s.1 has no NAME section:\n%s", programs[i], out);
		cr_expect(strstr(out, name_line) != NULL,
			  "%s.1's NAME is not \"%s - ...\"", programs[i],
			  programs[i]);
		cr_expect(strstr(out, "\nSYNOPSIS\n") != NULL);
		cr_expect(strstr(out, "\nEXIT STATUS\n") != NULL);
		free(out);
	}
}

/* natsync.ini(5), generated from configuration.md: every section, and a
 * key of each as the reference gives it. */
Test(install, configuration_man_page_renders_every_section)
{
	static const char *const want[] = {
		"\nNAME\n       natsync.ini - ",
		"\n   [agent]\n",
		"\n   [store]\n",
		"\n   [active]\n",
		"\n   [rings]\n",
		"\n   [source]\n",
		"\n   [standby]\n",
		"\n   [gateway]\n",
		"\n       role (default: active)\n",
		"\n       control_socket (default: /run/natsync/gateway.sock)\n",
	};
	int rc;
	char *out =
		capture(&rc, "MANWIDTH=200 man -l '%s%s/man5/natsync.ini.5'",
			in.destdir, in.mandir);

	cr_assert_eq(rc, 0, "man -l natsync.ini.5: exit %d:\n%s", rc, out);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(out, want[i]) != NULL,
			  "natsync.ini(5) lacks %s", want[i]);
	free(out);
}

/* systemd-analyze verify on unit (a file name in the unit directory) in
 * root: exit 0 and not a line of output. */
static void unit_verifies(const char *root, const char *unit)
{
	int rc;
	char *out =
		capture(&rc,
			"cd '%s' && MANPATH='%s%s' systemd-analyze verify "
			"--root='%s' '%s%s/%s'",
			root, root, in.mandir, root, root, in.unitdir, unit);

	cr_expect_eq(rc, 0, "systemd-analyze verify %s: exit %d", unit, rc);
	cr_expect_str_empty(out, "systemd-analyze verify %s:\n%s", unit, out);
	free(out);
}

Test(install, units_pass_systemd_analyze_verify)
{
	char root[600];
	int rc;
	char *out;

	/* The DESTDIR with the system's units beside ours. */
	snprintf(root, sizeof(root), "%s/verify-root", nst_run_dir());
	cr_assert_eq(nst_sh("rm -rf '%s' && cp -a '%s' '%s' && "
			    "mkdir -p '%s/usr/lib/systemd' && "
			    "cp -a /lib/systemd/system '%s/usr/lib/systemd/'",
			    root, in.destdir, root, root, root),
		     0);
	unit_verifies(root, "natsync-gateway.service");
	unit_verifies(root, "natsync-agent@.service");
	unit_verifies(root, "natsync-agent@kernel-active.service");
	/* The check is real: a unit naming a program that is not there. */
	cr_assert_eq(nst_sh("sed 's|natsync-gateway -c|natsync-nothing -c|' "
			    "'%s%s/natsync-gateway.service' > "
			    "'%s%s/natsync-broken.service'",
			    root, in.unitdir, root, in.unitdir),
		     0);
	out = capture(&rc,
		      "cd '%s' && MANPATH='%s%s' systemd-analyze verify "
		      "--root='%s' '%s%s/natsync-broken.service'",
		      root, root, in.mandir, root, root, in.unitdir);
	cr_expect_neq(rc, 0);
	cr_expect(strstr(out, "natsync-nothing") != NULL, "%s", out);
	free(out);
}

/* The value of key in an installed unit file ("" when absent). */
static void unit_key(char *buf, size_t len, const char *unit, const char *key)
{
	int rc;
	char *out = capture(&rc, "sed -n 's/^%s=//p' '%s%s/%s'", key,
			    in.destdir, in.unitdir, unit);

	out[strcspn(out, "\n")] = 0;
	snprintf(buf, len, "%s", out);
	free(out);
}

/* unit's ExecStart= runs the installed program on SYSCONFDIR/natsync/ini. */
static void unit_starts(const char *unit, const char *program, const char *ini)
{
	char v[512], want[512];

	unit_key(v, sizeof(v), unit, "ExecStart");
	cr_assert_lt(snprintf(want, sizeof(want), "%s/%s -c %s/natsync/%s",
			      in.bindir, program, in.sysconfdir, ini),
		     (int)sizeof(want));
	cr_expect_str_eq(v, want);
}

Test(install, units_run_the_installed_programs_on_the_examples)
{
	char v[512];

	unit_starts("natsync-agent@.service", "natsync-agent", "%i.ini");
	unit_starts("natsync-gateway.service", "natsync-gateway",
		    "gateway.ini");
	for (int i = 0; i < 2; i++) {
		const char *unit = i ? "natsync-gateway.service"
				     : "natsync-agent@.service";

		unit_key(v, sizeof(v), unit, "Type");
		cr_expect_str_eq(v, "notify", "%s", unit);
		unit_key(v, sizeof(v), unit, "WatchdogSec");
		cr_expect_str_eq(v, "30s", "%s", unit);
		unit_key(v, sizeof(v), unit, "Restart");
		cr_expect_str_eq(v, "on-failure", "%s", unit);
		/* The control socket's folder, the gateway's default. */
		unit_key(v, sizeof(v), unit, "RuntimeDirectory");
		cr_expect_str_eq(v, "natsync dpdk", "%s", unit);
	}
	/* NAME.example.ini becomes NAME.ini, the unit's -c: each example is
	 * valid for the installed program as it stands. */
	cr_expect_eq(nst_sh("'%s%s/natsync-gateway' -p -c "
			    "'%s%s/natsync/gateway.example.ini' >/dev/null",
			    in.destdir, in.bindir, in.destdir, in.sysconfdir),
		     0);
	cr_expect_eq(
		nst_sh("'%s%s/natsync-gateway' -p -c "
		       "'%s%s/natsync/gateway.example.ini' | "
		       "grep -qx 'control_socket = /run/natsync/gateway.sock'",
		       in.destdir, in.bindir, in.destdir, in.sysconfdir),
		0);
	for (int i = 0; i < 2; i++)
		cr_expect_eq(nst_sh("'%s%s/natsync-agent' -p -c "
				    "'%s%s/natsync/kernel-%s.example.ini' "
				    ">/dev/null",
				    in.destdir, in.bindir, in.destdir,
				    in.sysconfdir, i ? "standby" : "active"),
			     0);
	/* The scripts' defaults: the gateway's socket and the unit's
	 * configuration names. */
	cr_expect_eq(nst_sh("grep -qx 'sock=/run/natsync/gateway.sock' "
			    "'%s%s/natsync/keepalived-notify.sh'",
			    in.destdir, in.libexecdir),
		     0);
	cr_expect_eq(nst_sh("grep -qx 'active_ini=/etc/natsync/"
			    "kernel-active.ini' "
			    "'%s%s/natsync/keepalived-kernel-notify.sh'",
			    in.destdir, in.libexecdir),
		     0);
	/* hugepages.sh runs from its installed folder (lib.sh beside it). */
	cr_expect_eq(nst_sh("'%s%s/natsync/hugepages.sh' --help >/dev/null",
			    in.destdir, in.libexecdir),
		     0);
}

/* A meson project of no program, version version, configured with
 * prefix in dir/build: a build directory build-deb.sh checks before it
 * packages. */
static void empty_project(const char *dir, const char *version,
			  const char *prefix)
{
	cr_assert_eq(nst_sh("mkdir -p '%s/src' && printf \"project('x', "
			    "'c', version : '%s')\\n\" > '%s/src/meson.build' "
			    "&& meson setup --prefix=%s --sysconfdir=/etc "
			    "'%s/build' '%s/src' >/dev/null",
			    dir, version, dir, prefix, dir, dir),
		     0);
}

/* deploy/build-deb.sh on dir/build, the package into dir: its exit
 * status, and its output (malloc'd) to search; no package made. */
static char *build_deb_refused(int *rc, const char *dir)
{
	char *out = capture(rc, "'%s' --build '%s/build' --out '%s'",
			    nst_src("deploy/build-deb.sh"), dir, dir);

	cr_expect_eq(nst_sh("test -z \"$(ls '%s'/*.deb 2>/dev/null)\"", dir), 0,
		     "a package was made:\n%s", out);
	return out;
}

Test(install, build_deb_refuses_a_build_not_for_usr)
{
	char dir[600];
	int rc;
	char *out;

	snprintf(dir, sizeof(dir), "%s/usrlocal", nst_run_dir());
	empty_project(dir, NATSYNC_VERSION, "/usr/local");
	out = build_deb_refused(&rc, dir);
	cr_expect_eq(rc, 2, "exit %d", rc);
	cr_expect(strstr(out, "configured with prefix /usr/local") != NULL,
		  "%s", out);
	cr_expect(strstr(out, "a package needs prefix /usr") != NULL, "%s",
		  out);
	free(out);
}

/* deploy/debian/changelog names the version the package is: a project
 * version it has no entry for is refused. */
Test(install, build_deb_refuses_a_version_the_changelog_lacks)
{
	char dir[600];
	int rc;
	char *out;

	snprintf(dir, sizeof(dir), "%s/unlogged", nst_run_dir());
	empty_project(dir, "99.0.0", "/usr");
	out = build_deb_refused(&rc, dir);
	cr_expect_eq(rc, 1, "exit %d:\n%s", rc, out);
	cr_expect(strstr(out, "the project is 99.0.0: add an entry") != NULL,
		  "%s", out);
	free(out);
}

static void package_purge(void)
{
	nst_sh("dpkg-query -W natsync >/dev/null 2>&1 && "
	       "dpkg --purge natsync >&2");
}

/* The package of the build under test when it is configured for /usr and
 * /etc (scripts/test.sh configures it so), else of build-deb.sh's own
 * build (a whole build: minutes), into the run directory; its path into
 * deb. */
static void build_package(char *deb, size_t len)
{
	char cmd[2048];
	int rc, own = strcmp(in.prefix, "/usr") == 0 &&
		      strcmp(in.sysconfdir, "/etc") == 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' %s%s%s --out '%s' 2>&2",
		 nst_src("deploy/build-deb.sh"), own ? "--build '" : "",
		 own ? nst_build("") : "", own ? "'" : "", nst_run_dir());
	/* build-deb.sh prints the package's path alone on stdout. */
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	if (!fgets(deb, (int)len, p))
		deb[0] = 0;
	rc = pclose(p);
	deb[strcspn(deb, "\n")] = 0;
	cr_assert_eq(rc, 0, "build-deb.sh failed");
	cr_assert(exists("%s", deb), "no package at '%s'", deb);
}

/* lintian, with its informational tags, on the package: no error, and
 * every program with the hardening flags lintian asks for (PIE, relro,
 * bindnow, FORTIFY). Its whole output goes to the test's log. */
static void package_passes_lintian(const char *deb)
{
	int rc;
	char *out = capture(&rc, "lintian -I '%s'", deb);

	fprintf(stderr, "lintian -I %s: exit %d\n%s", deb, rc, out);
	cr_assert_neq(rc, 127,
		      "no lintian (deploy/lib.sh's NATSYNC_PACKAGES):\n%s",
		      out);
	cr_expect(strncmp(out, "E: ", 3) != 0 && !strstr(out, "\nE: "),
		  "lintian reports errors:\n%s", out);
	cr_expect_eq(rc, 0, "lintian: exit %d:\n%s", rc, out);
	cr_expect(strstr(out, ": hardening-no-") == NULL,
		  "a program lacks a hardening flag:\n%s", out);
	free(out);
}

/* The paths of the package that do not exist yet, one a line into list:
 * what dpkg -i adds and dpkg --purge must take away. */
static void paths_the_package_adds(const char *deb, const char *list)
{
	cr_assert_eq(
		nst_sh("dpkg-deb --fsys-tarfile '%s' | tar -t | "
		       "sed -e 's|^\\./|/|' -e 's|/$||' | "
		       "while IFS= read -r p; do "
		       "[ -z \"$p\" ] || [ -e \"$p\" ] || [ -L \"$p\" ] || "
		       "echo \"$p\"; done > '%s'",
		       deb, list),
		0);
	cr_assert_eq(nst_sh("grep -qx /usr/bin/natsync-agent '%s'", list), 0,
		     "/usr/bin/natsync-agent is on this machine already");
}

/* Installed: the programs, man pages, units, scripts and examples where
 * dpkg -L says, the examples as conffiles, the units verified against
 * the system. */
static void installed_package_holds_its_files(void)
{
	char want[128];
	int rc;
	char *out = capture(&rc, "/usr/bin/natsync-agent --version");

	snprintf(want, sizeof(want), "natsync-agent %s\n", NATSYNC_VERSION);
	cr_expect_eq(rc, 0);
	cr_expect_str_eq(out, want);
	free(out);
	out = capture(&rc, "dpkg -L natsync");
	cr_expect_eq(rc, 0);
	for (size_t i = 0; i < N_PROGRAMS; i++) {
		char line[128];

		snprintf(line, sizeof(line), "\n/usr/bin/%s\n", programs[i]);
		cr_expect(strstr(out, line) != NULL, "dpkg -L: no %s", line);
		snprintf(line, sizeof(line), "\n/usr/share/man/man1/%s.1.gz\n",
			 programs[i]);
		cr_expect(strstr(out, line) != NULL, "dpkg -L: no %s", line);
	}
	cr_expect(strstr(out, "/systemd/system/natsync-agent@.service\n"));
	cr_expect(strstr(out, "/systemd/system/natsync-gateway.service\n"));
	cr_expect(strstr(out, "\n/etc/natsync/gateway.example.ini\n"));
	cr_expect(strstr(out, "\n/usr/share/man/man5/natsync.ini.5.gz\n"));
	cr_expect(strstr(out, "\n/usr/libexec/natsync/keepalived-notify.sh\n"));
	cr_expect(strstr(out, "\n/usr/share/doc/natsync/copyright\n"));
	cr_expect(strstr(out, "\n/usr/share/doc/natsync/changelog.gz\n"));
	free(out);
	/* /etc/natsync is the administrator's: conffiles. */
	out = capture(&rc, "dpkg-query -W -f='${Conffiles}' natsync");
	cr_expect(strstr(out, " /etc/natsync/gateway.example.ini ") != NULL,
		  "%s", out);
	cr_expect(strstr(out, " /etc/natsync/kernel-active.example.ini ") !=
			  NULL,
		  "%s", out);
	free(out);
	/* dpkg --verify: every file as the package's md5sums has it. */
	out = capture(&rc, "dpkg --verify natsync");
	cr_expect_eq(rc, 0, "dpkg --verify: exit %d", rc);
	cr_expect_str_empty(out, "dpkg --verify:\n%s", out);
	free(out);
	/* Installed for real, the units verify against the system. */
	out = capture(&rc, "cd / && systemd-analyze verify "
			   "natsync-gateway.service natsync-agent@x.service");
	cr_expect_eq(rc, 0, "systemd-analyze verify: exit %d", rc);
	cr_expect_str_empty(out, "%s", out);
	free(out);
}

Test(install, package_passes_lintian_installs_runs_and_purges,
     .fini = package_purge, .timeout = 900)
{
	char deb[1024];
	const char *added = nst_run_path("package-adds");
	int rc;
	char *out;

	nst_need_root("dpkg -i");
	cr_assert_neq(nst_sh("dpkg-query -W -f='${Status}' natsync 2>/dev/null "
			     "| grep -q 'ok installed'"),
		      0,
		      "the package natsync is installed on this machine; "
		      "the test would replace it");
	build_package(deb, sizeof(deb));
	package_passes_lintian(deb);
	paths_the_package_adds(deb, added);
	out = capture(&rc, "dpkg -i '%s'", deb);
	cr_assert_eq(rc, 0, "dpkg -i: exit %d:\n%s", rc, out);
	free(out);
	installed_package_holds_its_files();

	out = capture(&rc, "dpkg --purge natsync");
	cr_expect_eq(rc, 0, "dpkg --purge: exit %d:\n%s", rc, out);
	free(out);
	/* Nothing the package added is left, not even in dpkg's records. */
	out = capture(&rc,
		      "while IFS= read -r p; do "
		      "if [ -e \"$p\" ] || [ -L \"$p\" ]; then echo \"$p\"; "
		      "fi; done < '%s'; find /var/lib/dpkg/info -maxdepth 1 "
		      "-name 'natsync[.:]*'",
		      added);
	cr_expect_str_empty(out, "left after dpkg --purge:\n%s", out);
	free(out);
	cr_expect_neq(nst_sh("dpkg-query -W -f='${Status}' natsync 2>/dev/null "
			     "| grep -q ' installed'"),
		      0);
}

/* ---- the units' sandbox ------------------------------------------------
 * The hardening the units state, tried without systemd: the installed
 * programs run on the installed examples under tests/nst_unit_sandbox.sh,
 * which reads the installed unit (read-only system, its writable
 * directories, NoNewPrivileges, its capability bounding set). A control
 * run with an empty bounding set shows that the capabilities are what
 * lets them run. Root; Redis on 7650-7652, namespaces ninst-*. */

#define SANDBOX_STORE_PORT 7650

/* The command prefix that runs a program of the DESTDIR in the sandbox
 * of unit (in the DESTDIR's unit directory). */
static const char *sandbox(const char *unit, int nocaps)
{
	static char buf[2][2048];
	static int i;
	char *b = buf[i++ & 1];

	/* The DESTDIR stays visible where the build directory is (it may be
	 * under /tmp or /root, which the units hide). */
	snprintf(b, sizeof(buf[0]), "%s %s --keep '%s' '%s%s/%s' --",
		 nst_src("tests/nst_unit_sandbox.sh"),
		 nocaps ? "--no-caps" : "", in.destdir, in.destdir, in.unitdir,
		 unit);
	return b;
}

static void kernel_sandbox_gone(void)
{
	nst_store_stop(SANDBOX_STORE_PORT);
	nst_sh("ip netns del ninst-k 2>/dev/null; rm -f "
	       "/var/lib/natsync/ninst-kernel.tbl "
	       "/var/lib/natsync/ninst-standby.tbl");
}

/* The installed natsync-agent on an installed example configuration, in
 * the sandbox natsync-agent@.service describes (nocaps: without its
 * capabilities), stderr into stdout; its output (malloc'd) and status. */
static char *run_installed_agent(int *rc, int nocaps, const char *example,
				 const char *args, const char *extra)
{
	return capture(rc, "%s '%s%s/natsync-agent' -c '%s%s/natsync/%s' %s %s",
		       sandbox("natsync-agent@.service", nocaps), in.destdir,
		       in.bindir, in.destdir, in.sysconfdir, example, args,
		       extra);
}

/* The installed natsync-agent in its unit's sandbox, with its
 * capabilities, on example with args and extra, its dump (dump_key) at
 * dump: exit 0, the REPORT line of role, the dump written. Its output
 * (malloc'd) for the caller's own checks. */
static char *installed_agent_reports(const char *example, const char *args,
				     const char *extra, const char *dump_key,
				     const char *dump, const char *role)
{
	char more[1024], report[64];
	int rc;
	char *out;

	snprintf(more, sizeof(more), "%s --set %s=%s", extra, dump_key, dump);
	snprintf(report, sizeof(report), "REPORT role=%s ", role);
	out = run_installed_agent(&rc, 0, example, args, more);
	cr_expect_eq(rc, 0, "%s: exit %d:\n%s", example, rc, out);
	cr_expect(strstr(out, report) != NULL, "%s", out);
	cr_expect(exists("%s", dump), "no %s", dump);
	return out;
}

Test(install, agent_kernel_roles_run_in_the_units_sandbox,
     .fini = kernel_sandbox_gone, .timeout = 120)
{
	char args[2048];
	int rc;
	char *out;

	nst_need_root("namespaces, BPF, conntrack");
	nst_sh("ip netns del ninst-k 2>/dev/null");
	cr_assert_eq(nst_sh("ip netns add ninst-k"), 0);
	cr_assert_eq(nst_store_start_fresh(SANDBOX_STORE_PORT, 3, 0), 0);
	snprintf(args, sizeof(args),
		 "--set store.seeds=127.0.0.1:%d --duration 2",
		 SANDBOX_STORE_PORT);

	/* The kernel source in a gateway namespace, its dump in the state
	 * directory. */
	out = installed_agent_reports(
		"kernel-active.example.ini", args, "--set source.netns=ninst-k",
		"source.dump", "/var/lib/natsync/ninst-kernel.tbl", "active");
	cr_expect(strstr(out, " drained=yes ") != NULL, "%s", out);
	free(out);
	/* Control: no capabilities, no BPF program. */
	out = run_installed_agent(&rc, 1, "kernel-active.example.ini", args,
				  "--set source.dump=");
	cr_expect_eq(rc, 2, "kernel source without capabilities: exit %d:\n%s",
		     rc, out);
	cr_expect(strstr(out, "privileges missing") != NULL, "%s", out);
	free(out);

	/* The standby committing into the namespace's conntrack. */
	free(installed_agent_reports(
		"kernel-standby.example.ini", args,
		"--set standby.commit_netns=ninst-k", "standby.dump",
		"/var/lib/natsync/ninst-standby.tbl", "standby"));
	/* Control: entering the namespace needs CAP_SYS_ADMIN. */
	out = run_installed_agent(
		&rc, 1, "kernel-standby.example.ini", args,
		"--set standby.commit_netns=ninst-k --set standby.dump=");
	cr_expect_eq(rc, 2, "conntrack standby without capabilities: exit %d",
		     rc);
	cr_expect(strstr(out, "setns /run/netns/ninst-k") != NULL, "%s", out);
	free(out);
}

static void gateway_sandbox_gone(void)
{
	nst_sh("ip netns exec ninst-gw %s stop --port %d --dir '%s' >&2",
	       nst_src("deploy/redis-cluster.sh"), SANDBOX_STORE_PORT,
	       nst_run_path("store-gw"));
	nst_sh("ip netns del ninst-gw 2>/dev/null");
}

/* The installed natsync-gateway on gateway.example.ini in ninst-gw for
 * 3 s, in the sandbox natsync-gateway.service describes (nocaps: without
 * its capabilities), stderr into stdout; its output (malloc'd) and
 * status. */
static char *run_installed_gateway(int *rc, int nocaps)
{
	return capture(rc,
		       "ip netns exec ninst-gw %s '%s%s/natsync-gateway' -c "
		       "'%s%s/natsync/gateway.example.ini' --set "
		       "store.seeds=127.0.0.1:%d --set "
		       "gateway.control_socket=/run/natsync/ninst-gw.sock "
		       "--duration 3",
		       sandbox("natsync-gateway.service", nocaps), in.destdir,
		       in.bindir, in.destdir, in.sysconfdir,
		       SANDBOX_STORE_PORT);
}

Test(install, gateway_runs_in_its_units_sandbox, .fini = gateway_sandbox_gone,
     .timeout = 120)
{
	int rc;
	char *out;

	nst_need_root("namespaces, af_packet ports");
	nst_sh("ip netns del ninst-gw 2>/dev/null");
	/* The example's ports: af_packet on in0 and out0. */
	cr_assert_eq(nst_sh("ip netns add ninst-gw && "
			    "ip -n ninst-gw link add in0 type veth peer name "
			    "in0p && "
			    "ip -n ninst-gw link add out0 type veth peer name "
			    "out0p && "
			    "for l in lo in0 in0p out0 out0p; do "
			    "ip -n ninst-gw link set $l up || exit 1; done"),
		     0);
	cr_assert_eq(nst_sh("ip netns exec ninst-gw %s start --masters 3 "
			    "--port %d --dir '%s' >&2",
			    nst_src("deploy/redis-cluster.sh"),
			    SANDBOX_STORE_PORT, nst_run_path("store-gw")),
		     0);
	out = run_installed_gateway(&rc, 0);
	cr_expect_eq(rc, 0, "gateway: exit %d:\n%s", rc, out);
	/* Up, the control socket in its runtime directory, promoted through
	 * the store. */
	cr_expect(strstr(out, "control socket /run/natsync/ninst-gw.sock") !=
			  NULL,
		  "%s", out);
	cr_expect(strstr(out, " promotions=1 ") != NULL, "%s", out);
	free(out);
	/* Control: no capabilities, no af_packet port. */
	out = run_installed_gateway(&rc, 1);
	cr_expect_eq(rc, 1, "gateway without capabilities: exit %d:\n%s", rc,
		     out);
	cr_expect(strstr(out, "port net_af_packet0: no such DPDK device") !=
			  NULL,
		  "%s", out);
	free(out);
}
