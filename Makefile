# spadeopt — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
APP    ?= bargain

.PHONY: help install demo demo-live test test-fast lint check-java broker broker-stop chromium bench profile optimize compare clean
NOW    := $(shell date +%Y%m%d-%H%M%S)
RUN    ?= profiles/$(APP)/run-$(NOW)
# compare: NODES=1 runs local[2]; NODES=2 a local-cluster of 2 one-core executors
NODES  ?= 1
CORES  ?= $(if $(filter 1,$(NODES)),2,1)
REPEAT ?= 3
MASTER  = $(if $(filter 1,$(NODES)),,--master 'local-cluster[$(NODES),$(CORES),1024]')
# workloads long enough for a steady state (the apps' defaults are sized for tests);
# -p nodes=N lets the developer's manual fusion (FMAN) spread over the nodes too
SIZE_bargain = -p tuples=300000 -p nodes=$(NODES)
SIZE_outlier = -p samples=300000 -p nodes=$(NODES)
SIZE_chain   = -p n=16 -p work=100 -p tuples=100000

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: $(STAMP) ## create .venv and install spadeopt with its dev tools

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

check-java: ## Spark needs Java 17+
	@java -version >/dev/null 2>&1 || { echo "Java 17+ is required by Spark: sudo apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)"; exit 2; }

demo: $(STAMP) check-java ## the whole story on bargain (~6 min): profile, refine, optimize, compare; then fission on peer
	@# no rm -rf: every step below recognises and replaces only its own earlier output
	@echo "== stage 1: profile $(APP) (fused, instrumented, s = 0.01)"
	@# a profiling run directory is never reused: each demo writes a new one
	$(BIN)/spadeopt profile apps/$(APP).py --fusion all $(SIZE_$(APP)) --sample-rate 0.01 -o out/demo/profile-run-$(NOW)
	@echo "== refine the samples on Spark into per-operator CPU fractions and link rates"
	$(BIN)/spadeopt refine out/demo/profile-run-$(NOW) -o out/demo/profile.json
	$(BIN)/spadeopt show out/demo/profile.json --top 8
	@echo "== stage 2: GreedyFuse + placement at the highest rate 2 cores sustain"
	$(BIN)/spadeopt optimize apps/$(APP).py --profile out/demo/profile.json -o out/demo/build-auto
	$(BIN)/spadeopt explain out/demo/build-auto --png out/demo/plan.png --dot out/demo/plan.dot
	@echo "== compare NONE / FALL / FMAN / FATM, interleaved, same workload"
	$(BIN)/spadeopt compare apps/$(APP).py $(SIZE_$(APP)) --profile out/demo/profile.json --repeat 3 --out out/demo/compare
	@echo "== fission: FATM chooses how wide the peer workload's data-parallel region runs (source, 16 functors,"
	@echo "   counting sink); FATM-w1 is --no-fission"
	$(BIN)/spadeopt compare apps/peer.py -p tuples=1000000 --strategies all,auto --no-fission --repeat 3 --out out/demo/peer
	$(BIN)/spadeopt explain out/demo/peer/build-auto --png out/demo/peer-plan.png

demo-live: $(STAMP) check-java ## live data (~6 min): broker, a paced feed, profile --duration, FATM, a live run showing lag, SIGTERM, latency; stops what it started
	BIN=$(BIN) bash scripts/demo_live.sh

broker: $(STAMP) ## start the project's Redis broker (127.0.0.1:16379, password in .spadeopt-broker/password); installs redis-server if missing
	@command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server (Debian package)"; \
			(apt-get update -q && apt-get install -y -q redis-server) >/dev/null || exit 2; \
		else echo "the broker needs redis-server: sudo apt-get install -y redis-server"; exit 2; fi; }
	$(BIN)/spadeopt broker start

chromium: ## the headless browser the live page's tests drive (Debian's chromium package); installs it if missing
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium (Debian package)"; \
			(apt-get update -q && apt-get install -y -q chromium) >/dev/null || exit 2; \
		else echo "the browser tests need chromium: sudo apt-get install -y chromium"; exit 2; fi; }

broker-stop: $(STAMP) ## stop the broker `make broker` started (only that process: pid and start time checked)
	$(BIN)/spadeopt broker stop

test: $(STAMP) check-java broker chromium ## run the whole test suite (real Spark in local mode) on two pytest workers
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=20

test-fast: $(STAMP) ## the tests that start no Spark, need no broker or browser and are not slow (<= 3 min); an unmarked one that starts Spark fails
	SPADEOPT_NO_SPARK=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not spark and not slow and not broker and not browser"

profile: $(STAMP) check-java ## stage 1: profile APP (default bargain; fused, s = 0.01, as optimize and compare) into profiles/APP/run-*
	$(BIN)/spadeopt profile apps/$(APP).py $(SIZE_$(APP)) -o $(RUN)

optimize: $(STAMP) check-java ## profile (fused) -> refine -> optimize APP [NODES=2]; leaves build/APP/auto for `spadeopt run`
	$(BIN)/spadeopt profile apps/$(APP).py --fusion all $(SIZE_$(APP)) --sample-rate 0.01 -o $(RUN)
	$(BIN)/spadeopt refine $(RUN) -o profiles/$(APP)/profile.json
	$(BIN)/spadeopt optimize apps/$(APP).py --profile profiles/$(APP)/profile.json --nodes $(NODES) --cores $(CORES) \
		-o build/$(APP)/auto

compare: $(STAMP) check-java ## NONE / FALL / FMAN / FATM on APP [NODES=2]: table, out/compare/APP-Nn/compare.{json,png}
	$(BIN)/spadeopt compare apps/$(APP).py $(SIZE_$(APP)) --nodes $(NODES) --cores $(CORES) $(MASTER) \
		--repeat $(REPEAT) --out out/compare/$(APP)-$(NODES)n

lint: $(STAMP) ## ruff
	$(BIN)/ruff check spadeopt apps tests

bench: $(STAMP) check-java ## micro-benchmarks; figures go to out/bench/
	$(BIN)/spadeopt bench fused-overhead --out out/bench
	$(BIN)/spadeopt bench profiling-overhead --out out/bench
	$(BIN)/spadeopt bench fusion-tradeoff --out out/bench
	$(BIN)/spadeopt bench optimizer --out out/bench

clean: ## remove generated builds and outputs
	rm -rf build out
