# spadeopt — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
APP    ?= bargain

.PHONY: help install demo test lint check-java bench profile optimize compare clean
NOW    := $(shell date +%Y%m%d-%H%M%S)
RUN    ?= profiles/$(APP)/run-$(NOW)

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

demo: $(STAMP) check-java ## run the bargain app on local Spark, unfused and with the developer's fusion
	$(BIN)/spadeopt run apps/$(APP).py --fusion none --json out/demo/$(APP)-none.json
	$(BIN)/spadeopt run apps/$(APP).py --fusion manual --json out/demo/$(APP)-manual.json --out out/demo/$(APP)-sinks

test: $(STAMP) check-java ## run the test suite (real Spark in local mode)
	$(BIN)/python -m pytest -q

profile: $(STAMP) check-java ## stage 1: profile APP (default bargain) unfused into profiles/APP/run-*
	$(BIN)/spadeopt profile apps/$(APP).py --fusion none -o $(RUN)

optimize: $(STAMP) check-java ## profile -> refine -> optimize APP; leaves build/APP/auto for `spadeopt run`
	$(BIN)/spadeopt profile apps/$(APP).py --fusion none --sample-rate 0.01 -o $(RUN)
	$(BIN)/spadeopt refine $(RUN) -o profiles/$(APP)/profile.json
	$(BIN)/spadeopt optimize apps/$(APP).py --profile profiles/$(APP)/profile.json -o build/$(APP)/auto

compare: $(STAMP) check-java ## NONE / FALL / FMAN / FATM on APP: table, out/compare/APP/compare.{json,png}
	$(BIN)/spadeopt compare apps/$(APP).py --out out/compare/$(APP)

lint: $(STAMP) ## ruff
	$(BIN)/ruff check spadeopt apps tests

bench: $(STAMP) check-java ## micro-benchmarks; figures go to out/bench/
	$(BIN)/spadeopt bench fused-overhead --out out/bench
	$(BIN)/spadeopt bench profiling-overhead --out out/bench
	$(BIN)/spadeopt bench fusion-tradeoff --out out/bench
	$(BIN)/spadeopt bench optimizer --out out/bench

clean: ## remove generated builds and outputs
	rm -rf build out
