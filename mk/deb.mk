# `make deb`: Debian packages kiln, kiln-agent and kilnctl in build/deb/,
# from what `make all` built (debian/rules compiles nothing), with the
# systemd units of contrib/systemd and the defaults of contrib/default.
# The version is 0.0~gitYYYYMMDD.HASH of the checkout (git describe has no
# tags to count from yet).
DEB_VERSION ?= 0.0~git$(shell git -C '$(CURDIR)' log -1 --format=%cd.%h --date=format:%Y%m%d 2>/dev/null || echo 0)
.PHONY: deb
deb: all
	rm -rf build/deb && mkdir -p build/deb
	DEB_VERSION='$(DEB_VERSION)' fakeroot debian/rules binary
	fakeroot debian/rules clean >/dev/null
	@ls build/deb/*.deb
