# rocketspark: `make test` and `make run` do all set-up themselves on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEPS := $(VENV)/.deps-installed
INSTALLED := $(VENV)/.project-installed
COMPILED := $(VENV)/.compiled-in-place
SOURCES := $(shell find rocketspark broker nameserver -type f -not -path '*/__pycache__/*' -not -name '*.so' 2>/dev/null)

.PHONY: test compiled uncompiled run check docs bench bench-rocketmq4 bench-wire bench-spark bench-spark-latency bench-resilience bench-security protos clean

# Dependencies once; the project itself is installed the way a user installs it (not in
# editable mode), so that Spark's data-source discovery finds pyspark_rocketmq, and again
# whenever a source file changes. build/ goes first: setuptools copies into it and never removes
# what an earlier install left there (a module since moved into a package would be installed still).
$(DEPS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'setuptools>=77'  # the builds below run on the venv's setuptools
	rm -rf build
	$(PY) -m pip install --quiet '.[test,docs]'
	touch $(DEPS)

# This install compiles the broker's request path with mypyc (setup.py) from the venv's mypy
# (--no-build-isolation builds with it; the install of the dependencies above compiles nothing).
# The tests and benchmarks run the checkout, so it is also compiled in place (each extension
# beside its .py, loaded first), from the same build/ (mypyc rewrites only C that changed, so
# nothing is compiled twice). Every extension is dated to the build's start: a source saved
# during the build is newer, and the tests refuse to start on a source newer than the build
# (rocketspark/compiled.py). `make uncompiled` removes them: the checkout then runs as source.
$(INSTALLED): $(DEPS) $(SOURCES) setup.py
	rm -rf build
	$(PY) -m pip install --quiet --no-deps --force-reinstall --no-build-isolation .
	touch $(INSTALLED)

$(COMPILED): $(DEPS) $(SOURCES) setup.py | $(INSTALLED)
	$(MAKE) --no-print-directory uncompiled
	touch $(COMPILED).started
	$(PY) setup.py --quiet build_ext --inplace
	find . -maxdepth 1 -name '*__mypyc*.so' -exec touch -r $(COMPILED).started {} +
	find rocketspark broker nameserver -name '*.so' -exec touch -r $(COMPILED).started {} +
	mv $(COMPILED).started $(COMPILED)

compiled: $(COMPILED)

uncompiled:
	rm -f $(COMPILED)
	find . -maxdepth 1 -name '*__mypyc*.so' -delete
	find rocketspark broker nameserver -name '*.so' -delete

# The console's test drives Debian's headless chromium: installed here when missing (root, apt).
CHROMIUM := $(shell command -v chromium || command -v chromium-browser)
# The dashboard and alert rules' test runs Debian's prometheus (and its promtool): installed here when missing.
PROMETHEUS := $(shell command -v prometheus)
# The RocketMQ 4.x client the tests run (ali-ons, npm), pinned by its package-lock.json.
ALI_ONS := tests/ali_ons/node_modules/.installed
NPM := $(shell command -v npm)

$(ALI_ONS): tests/ali_ons/package.json tests/ali_ons/package-lock.json
ifeq ($(NPM),)
	@echo "installing node and npm (the RocketMQ 4.x client in the tests is ali-ons, an npm package)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
endif
	cd tests/ali_ons && npm ci --no-audit --no-fund --loglevel=error
	touch $(ALI_ONS)

test: $(INSTALLED) $(COMPILED) $(ALI_ONS)
ifeq ($(CHROMIUM),)
	@echo "installing chromium (the web console's test runs it headless)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
endif
ifeq ($(PROMETHEUS),)
	@echo "installing prometheus (the dashboard and alert rules are tested against a real one)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus
endif
	$(MAKE) --no-print-directory docs
	$(PY) -m pytest -q

run: $(INSTALLED)
	$(PY) examples/main_job.py

# The docs site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor fails the build.
# The reference pages under docs/reference/ are generated: python -m rocketspark.reference.
docs: $(DEPS)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

check: $(INSTALLED)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(INSTALLED) $(COMPILED)
	$(PY) benchmarks/bench_broker.py

bench-rocketmq4: $(INSTALLED) $(COMPILED) $(ALI_ONS)
	$(PY) benchmarks/bench_rocketmq4.py

bench-wire: $(INSTALLED) $(COMPILED)  # starts Redis and NATS JetStream too (apt-get installs them when missing)
	$(PY) benchmarks/bench_wire.py

bench-spark: $(INSTALLED) $(COMPILED)
	$(PY) benchmarks/bench_spark.py

bench-spark-latency: $(INSTALLED) $(COMPILED)
	$(PY) benchmarks/bench_spark_latency.py

bench-resilience: $(INSTALLED) $(COMPILED)
	$(PY) benchmarks/bench_resilience.py

bench-security: $(INSTALLED) $(COMPILED)
	$(PY) benchmarks/bench_security.py

protos: $(INSTALLED)  # regenerate rocketspark/grpcv2/stubs from protos/ (needs the dev extra: grpcio-tools)
	$(PY) -m pip install -q ".[dev]" && $(PY) tools/gen_protos.py

clean: uncompiled
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
