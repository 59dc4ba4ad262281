# The two commands of the README:
#   make app   install into .venv and start the dashboard on the embedded sample
#   make test  install into .venv (with the test tools) and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
# The dashboard listens on this machine only; ADDRESS=0.0.0.0 opts in to other interfaces.
ADDRESS ?= localhost

.PHONY: app test lint install install-dev samples bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files make a second `make app` / `make test` start at once; they are redone
# whenever a requirements file or pyproject.toml changes.
$(VENV)/.installed: $(BIN)/python requirements.txt pyproject.toml
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

app: install
	$(BIN)/streamlit run app.py --server.port $(PORT) --server.address $(ADDRESS) --server.headless true --browser.gatherUsageStats false

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: install-dev
	$(BIN)/ruff check .

samples: install
	$(BIN)/python -m fairaudit.samples

bench: install-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
