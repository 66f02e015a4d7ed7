# psched — one non-recursive Makefile.  `make help` lists the targets.
#
# Objects go to $(BUILD) (build/, build-asan/, build-tsan/).  Sources are
# found by wildcard so a new module or test needs no edit here:
#   common/*.c common/transport/*.c worker/*.c server/*.c scheduler/*.c
#     app/*.c -> libpsched.a / libpsched.so   (only what a user links)
#   scheduler/tuner/*.c -> libpsched_tuner.a (GSL; linked by ps-scheduler)
#   programs/ps-NAME/*.c -> $(BUILD)/bin/ps-NAME (the four programs)
#   tests/unit/test_*.c, tests/transport/test_*.c -> one binary each

BUILD    ?= build
CC       ?= gcc
V        ?= 0
Q        := $(if $(filter 1,$(V)),,@)

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
            -Wmissing-prototypes -Wformat=2 -Wwrite-strings -Wundef \
            -Wpointer-arith -Wcast-qual -Wvla
# Peer descriptions are cut to fit their buffers on purpose.
WARN     += -Wno-format-truncation
OPT      ?= -O2 -g
# Hidden by default: the shared library exports only what the public
# headers declare (they push default visibility), i.e. psched_*.
CFLAGS   += -std=gnu11 $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread \
            $(EXTRA_CFLAGS)
# Generated protobuf-c headers are -isystem: their init macros cast away
# const, which -Wcast-qual would reject in every includer.
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Icommon -isystem $(BUILD)/gen -MMD -MP
LDFLAGS  += -pthread $(EXTRA_LDFLAGS)

PKGS     := libprotobuf-c gsl nettle zlib
HAVE_PKG := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo 1)
# On a fresh machine install the Debian packages before anything is read
# from pkg-config or the headers (goals that build nothing skip this).
# Installing from a recipe instead would leave this make's flags empty.
NO_DEPS_GOALS := clean help format format-check test-fresh
ifneq ($(HAVE_PKG),1)
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
DEPS_RC  := $(shell bash scripts/install-deps.sh >&2; echo $$?)
ifneq ($(DEPS_RC),0)
$(error scripts/install-deps.sh failed (exit $(DEPS_RC)): see above)
endif
HAVE_PKG := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo 1)
endif
endif
ifeq ($(HAVE_PKG),1)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PROTO_LIBS := $(shell pkg-config --libs libprotobuf-c)
GSL_LIBS   := $(shell pkg-config --libs gsl)
SYS_LIBS   := $(shell pkg-config --libs nettle zlib)
endif
# rdma-core ships no .pc files on Debian 12; detect by header.
HAVE_RDMA := $(shell test -f /usr/include/rdma/rdma_cma.h && \
               test -f /usr/include/infiniband/verbs.h && echo 1)
ifeq ($(HAVE_RDMA),1)
CPPFLAGS  += -DPSCHED_HAVE_RDMA=1
RDMA_LIBS := -lrdmacm -libverbs
endif
CPPFLAGS += $(PKG_CFLAGS) -DPSCHED_VERSION='"$(shell cat VERSION)"'
LIBS     := $(PROTO_LIBS) $(GSL_LIBS) $(SYS_LIBS) $(RDMA_LIBS) -lm

# CUDA (docs/gpu.md): built into libpsched when nvcc is found in
# CUDA_HOME (default /usr/local/cuda); CUDA=0 forces it off, CUDA=1 makes a
# missing nvcc an error.  The runtime is linked statically (libcudart_static,
# which loads the driver itself), so the library runs where there is no
# GPU, driver or libcudart.so: device buffers are then refused.
CUDA_HOME ?= /usr/local/cuda
ifneq ($(CUDA),0)
NVCC     := $(wildcard $(CUDA_HOME)/bin/nvcc)
# nvcc compiles host code with g++ (scripts/install-deps.sh installs it).
ifneq ($(NVCC),)
ifeq ($(shell command -v g++ 2>/dev/null),)
$(warning nvcc found but no g++ (its host compiler): building without CUDA)
NVCC     :=
endif
endif
endif
ifeq ($(CUDA)$(NVCC),1)
$(error CUDA=1 but no nvcc in CUDA_HOME=$(CUDA_HOME))
endif
ifneq ($(NVCC),)
HAVE_CUDA := 1
CPPFLAGS  += -DPSCHED_HAVE_CUDA=1 -isystem $(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt
# sm_75 code plus its PTX, which newer GPUs compile when loaded.
NVCC_ARCH ?= -arch=sm_75
NVCCFLAGS := -std=c++17 -O2 $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-fno-exceptions,-fno-threadsafe-statics \
             -D_GNU_SOURCE -DPSCHED_HAVE_CUDA=1 -Iinclude -Icommon
endif
LIBS     += $(CUDA_LIBS)

# Objects depend on this file, rewritten only when the compile flags
# change, so a flag change rebuilds everything it affects.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CPPFLAGS) $(CFLAGS) $(NVCC) $(NVCCFLAGS)
$(shell mkdir -p $(BUILD) && \
  [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || \
  printf '%s\n' '$(FLAGS_NOW)' >$(FLAGS_STAMP))

PROTO_C  := $(BUILD)/gen/psched.pb-c.c
PROTO_H  := $(BUILD)/gen/psched.pb-c.h

LIB_DIRS := common common/gpu common/transport common/transport/shm worker \
            server scheduler app
# The RDMA transport only where rdma-core is (stubs in transport.h else).
ifeq ($(HAVE_RDMA),1)
LIB_DIRS += common/transport/rdma
endif
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
TUNER_SRC := $(wildcard scheduler/tuner/*.c)
TUNER_OBJ := $(TUNER_SRC:%.c=$(BUILD)/obj/%.o)
# The scheduler runs the tuner (--autotune), so the library holds it and
# links GSL; scheduler/tuner/ stays the only code that calls GSL.
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/psched.pb-c.o \
            $(TUNER_OBJ)
# The GPU kernels (nvcc), only with CUDA.
ifeq ($(HAVE_CUDA),1)
CU_SRC   := $(wildcard common/gpu/*.cu)
LIB_OBJ  += $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
endif

PROGRAMS := ps-scheduler ps-server ps-worker ps-bench
PROG_BIN := $(PROGRAMS:%=$(BUILD)/bin/%)
# Each program's objects: every .c of its folder programs/ps-NAME/.
prog_obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard programs/$(1)/*.c))

UNIT_SRC := $(wildcard tests/unit/test_*.c tests/transport/test_*.c)
UNIT_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRC))
# C++ programs on the ps-lite API (include/ps/, header-only over libpsched).
CXX      ?= g++
PSLITE_CXXFLAGS := -std=c++11 $(OPT) -Wall -Wextra -Werror -pthread \
            $(EXTRA_CFLAGS)
PSLITE_SRC := $(wildcard tests/pslite/*.cc)
PSLITE_BIN := $(patsubst tests/pslite/%.cc,$(BUILD)/tests/pslite/%,$(PSLITE_SRC))

STATIC_LIB := $(BUILD)/lib/libpsched.a
# libpsched.so.$(SOVERSION) is the library (its SONAME); libpsched.so is the
# link-time name, a symlink.  Bump SOVERSION on an ABI break (a removed or
# changed function, a public struct changed).
SOVERSION  := 1
# The release: VERSION is its only source (C: psched_version(), every
# program's --version, Python psched.__version__, psched.pc, the .debs).
VERSION    := $(shell cat VERSION)
SHARED_LIB := $(BUILD)/lib/libpsched.so
SHARED_REAL := $(SHARED_LIB).$(SOVERSION)
TUNER_LIB  := $(BUILD)/lib/libpsched_tuner.a
DEPS_STAMP := $(BUILD)/.deps-ok

PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib

.PHONY: all deps test test-long unit bench bench-sched bench-rdma run asan asan-build \
        tsan tsan-build install deb gpu-bundle gpu-bundle-check test-fresh format format-check check clean help tests \
        fuzz soak
.DEFAULT_GOAL := all
# Test objects are not intermediates: keep them between runs.  (Not
# ".SECONDARY:" with no targets: that made every object secondary, and a
# missing object whose source is older than the library, as after a git mv,
# was never built.)
.PRECIOUS: $(BUILD)/obj/%.o

all: $(STATIC_LIB) $(SHARED_LIB) $(PROG_BIN)
tests: $(UNIT_BIN) $(HELPER_BIN) $(PSLITE_BIN)

# Missing Debian packages are installed once per build dir; the script
# skips what is already installed.
$(DEPS_STAMP): scripts/install-deps.sh
	$(Q)bash scripts/install-deps.sh
	$(Q)mkdir -p $(@D) && touch $@
deps: $(DEPS_STAMP)

$(PROTO_C) $(PROTO_H): proto/psched.proto | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  PROTOC  $<"
	$(Q)protoc-c --proto_path=proto --c_out=$(BUILD)/gen $<

# Generated code: same flags, except -Wcast-qual/-Wmissing-prototypes which
# protoc-c's output violates (casts of const descriptors).
$(BUILD)/obj/gen/psched.pb-c.o: $(PROTO_C) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-cast-qual -Wno-missing-prototypes -c $< -o $@

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_STAMP) | $(PROTO_H)
	@mkdir -p $(@D)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED_REAL): $(LIB_OBJ)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,libpsched.so.$(SOVERSION) \
	  -Wl,--no-undefined -Wl,--exclude-libs,ALL -o $@ $^ $(LIBS)

$(SHARED_LIB): $(SHARED_REAL)
	$(Q)ln -sf $(notdir $<) $@

# pkg-config file of the installed tree, written by `make install` for its
# PREFIX.  rdma-core ships no .pc files on Debian 12, so its libraries are
# listed by name.
PC_LINES = 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
  'includedir=$${prefix}/include' '' 'Name: psched' \
  'Description: parameter-server communication library' \
  'Version: $(VERSION)' 'Requires.private: $(PKGS)' \
  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lpsched' \
  'Libs.private: $(RDMA_LIBS) $(CUDA_LIBS) -lm -pthread'

$(TUNER_LIB): $(TUNER_OBJ)
	@mkdir -p $(@D)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/ps-scheduler: $(call prog_obj,ps-scheduler) $(TUNER_LIB) $(STATIC_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(GSL_LIBS) $(LIBS)

$(BUILD)/bin/ps-server: $(call prog_obj,ps-server) $(STATIC_LIB)
$(BUILD)/bin/ps-worker: $(call prog_obj,ps-worker) $(STATIC_LIB)
$(BUILD)/bin/ps-bench: $(call prog_obj,ps-bench) $(STATIC_LIB)
$(BUILD)/bin/ps-server $(BUILD)/bin/ps-worker $(BUILD)/bin/ps-bench:
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# Unit tests of a program's own modules link those objects too (ps-worker's
# model profiles: not in the library).
$(BUILD)/tests/unit/test_profile: $(BUILD)/obj/programs/ps-worker/profile.o

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/obj/tests/harness.o $(TUNER_LIB) $(STATIC_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(GSL_LIBS) $(LIBS)

$(BUILD)/tests/helpers/%: $(BUILD)/obj/tests/helpers/%.o $(STATIC_LIB)
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/pslite/%: tests/pslite/%.cc $(wildcard include/ps/*.h include/ps/internal/*.h) include/psched.h $(STATIC_LIB)
	@mkdir -p $(@D)
	@echo "  CXX     $@"
	$(Q)$(CXX) $(PSLITE_CXXFLAGS) -Iinclude $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# The whole suite: unit, transport conformance, integration (loopback,
# namespaces, soft-RoCE VM when it boots), then the sanitizer builds.
test: all tests
	$(Q)BUILD=$(BUILD) bash tests/run.sh

# The long runs, kept out of `make test` (each has a short variant
# there): the scripts marked "# long" (tests/README.md), e.g. the full
# autotune end-to-end against a grid search.
test-long: all tests
	$(Q)BUILD=$(BUILD) PS_SUITE=long bash tests/run.sh

# Only unit + transport + loopback integration of this build (used by
# the sanitizer targets).
unit: all tests
	$(Q)BUILD=$(BUILD) PS_SUITE=quick bash tests/run.sh

ASAN_MAKE = $(MAKE) --no-print-directory BUILD=build-asan OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=address,undefined"

asan:
	$(Q)$(ASAN_MAKE) unit

# The ASan tree without running it (the soft-RoCE VM test runs it there).
asan-build:
	$(Q)$(ASAN_MAKE) all tests

TSAN_MAKE = $(MAKE) --no-print-directory BUILD=build-tsan OPT="-O1 -g" \
	  EXTRA_CFLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=thread"

# Its scripts run their lite clusters (PS_TEST_LITE=1, tests/README.md).
tsan:
	$(Q)PS_TEST_LITE=1 $(TSAN_MAKE) unit

# The TSan tree without running it (the soft-RoCE VM test runs its
# transport tests there).
tsan-build:
	$(Q)$(TSAN_MAKE) all tests

run: all
	$(Q)BUILD=$(BUILD) bash scripts/run-local.sh

# libFuzzer harnesses (clang, ASan+UBSan, tree build-fuzz/) over the corpus
# in tests/fuzz/corpus/, FUZZ_SECONDS in all (tests/fuzz/run.sh).  `make
# test` runs them briefly (tests/integration/test_fuzz.sh).
FUZZ_SECONDS ?= 120
fuzz:
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh

# Minutes of push/pull with the nodes' RSS sampled; RSS must stay flat
# (tests/soak.sh, SOAK_SECONDS).  Not part of `make test`.
SOAK_SECONDS ?= 300
soak: all tests
	$(Q)BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) bash tests/soak.sh

bench: all
	$(Q)BUILD=$(BUILD) bash bench/run-bench.sh

# FIFO vs priority+credit over a partition x credit grid, replaying
# VGG-16 and ResNet-50 in network namespaces with tbf-shaped links (root;
# ~1 hour; BENCH_SCHED_ARGS=--quick: ~5 min).  Output in
# $(BUILD)/bench/sched-bench/ (BENCH_SCHED_ARGS="--out DIR": elsewhere).
# docs/benchmarks.md "Scheduling".
bench-sched: all $(BUILD)/tests/helpers/delayline
	$(Q)BUILD=$(BUILD) bash bench/sched-bench.sh $(BENCH_SCHED_ARGS)

# Online tuning vs default, best static, one-shot BO under a changing link
# (root; docs/benchmarks.md "Online tuning").  BENCH_AUTOTUNE_ARGS=--smoke:
# short.  Output in $(BUILD)/bench/autotune-bench/ (BENCH_AUTOTUNE_ARGS=
# "--out DIR": elsewhere).
.PHONY: bench-autotune
bench-autotune: all $(BUILD)/tests/helpers/delayline
	$(Q)BUILD=$(BUILD) bash bench/autotune-bench.sh $(BENCH_AUTOTUNE_ARGS)

# psched.torch against DDP over gloo on this machine, interleaved rounds
# (docs/benchmarks.md "PyTorch against DDP"); BENCH_TORCH_ARGS, e.g.
# "--models mlp --workers 4 --servers 2 --rounds 5".
.PHONY: bench-torch
bench-torch: all
	$(Q)PSCHED_LIBRARY=$(CURDIR)/$(SHARED_LIB) PSCHED_BIN_DIR=$(CURDIR)/$(BUILD)/bin \
		$${PYTHON:-/usr/bin/python3} bench/torch-vs-ddp.py $(BENCH_TORCH_ARGS)

# ps-lite's test_kv_app_benchmark.cc built against ps-lite and against
# include/ps/, side by side (PSLITE: a ps-lite checkout with build/libps.a).
.PHONY: bench-pslite print-libs
bench-pslite: all
	$(Q)BUILD=$(BUILD) bash bench/pslite-api.sh $(BENCH_PSLITE_ROUNDS)

# What periodic snapshots cost a VGG-16 replay (docs/snapshots.md).
.PHONY: bench-snapshot
bench-snapshot: all
	$(Q)bash bench/snapshot-cost.sh $(BENCH_SNAPSHOT_ROUNDS) 100 $(BUILD)

# What a program linked with libpsched.a needs after it.
print-libs:
	@echo $(LIBS)

# Debian's python3 searches $(PREFIX)/lib/python3/dist-packages for
# PREFIX /usr/local and /usr; the package finds libpsched.so two levels up.
PYDIR    ?= $(PREFIX)/lib/python3/dist-packages

# ib_write_bw vs ps-bench RDMA push/pull vs ps-bench TCP, in one
# soft-RoCE VM (../shared/rdma-vm/run-in-rxe-vm).
bench-rdma: all
	$(Q)BUILD=$(BUILD) bash bench/run-bench-rdma.sh

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PREFIX)/include/psched \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PYDIR)/psched \
	  $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sf libpsched.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpsched.so
	printf '%s\n' $(PC_LINES) >$(DESTDIR)$(LIBDIR)/pkgconfig/psched.pc
	install -m 644 include/psched.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/psched/*.h $(DESTDIR)$(PREFIX)/include/psched/
	install -d $(DESTDIR)$(PREFIX)/include/ps/internal
	install -m 644 include/ps/*.h $(DESTDIR)$(PREFIX)/include/ps/
	install -m 644 include/ps/internal/*.h $(DESTDIR)$(PREFIX)/include/ps/internal/
	install -m 755 $(PROG_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 bin/psched-launch $(DESTDIR)$(PREFIX)/bin/
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 python/psched/*.py $(DESTDIR)$(PYDIR)/psched/
	install -d $(DESTDIR)$(PYDIR)/psched/torch
	install -m 644 python/psched/torch/*.py $(DESTDIR)$(PYDIR)/psched/torch/
	printf '__version__ = "%s"\n' '$(VERSION)' >$(DESTDIR)$(PYDIR)/psched/_version.py
	$(Q)if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

# Debian packages (dpkg-deb) in $(BUILD)/deb: libpsched1, libpsched-dev,
# psched-tools, python3-psched (scripts/mkdeb.sh).
deb: all
	$(Q)BUILD=$(BUILD) VERSION=$(VERSION) bash scripts/mkdeb.sh

# The GPU check's bundle (docs/gpu.md "Checking a GPU"): everything
# tests/gpu/gpu-check.sh needs on a bare GPU machine, in $(BUILD)/gpu-bundle;
# gpu-bundle-check runs it in a fresh Debian 12 chroot (root, downloads).
gpu-bundle: all tests
	$(Q)bash scripts/gpu-bundle.sh $(BUILD) $(BUILD)/gpu-bundle
gpu-bundle-check: gpu-bundle
	$(Q)bash scripts/gpu-bundle-chroot.sh $(BUILD)/gpu-bundle

# The README's two commands in a fresh Debian 12 chroot (debootstrap;
# root, downloads, long; not part of make test).  scripts/test-fresh.sh.
test-fresh:
	$(Q)bash scripts/test-fresh.sh

FORMAT_SRC = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRC)

check: format-check all test asan tsan

clean:
	rm -rf build build-asan build-tsan build-fuzz

help:
	@echo "targets: all test test-long bench bench-sched bench-rdma run asan asan-build tsan tsan-build fuzz soak install deb gpu-bundle gpu-bundle-check test-fresh format format-check check clean"

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
