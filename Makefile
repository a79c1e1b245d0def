# deltafin — one Makefile.  Targets: all (= lib cli dev tests) lib cli dev tests test install uninstall
#                            demo bench asan ubsan fuzz clean deps
# Build variants go to separate folders: build/ (release), build-asan/ (ASan+UBSan).
CC      ?= gcc
# MPI=1: expert parallelism across processes (src/dist/, docs/distributed.md), built with mpicc
# into build-mpi/; MPI=auto: when mpicc exists. Without it the binary is the single-machine one.
MPI     ?= 0
ifeq ($(MPI),auto)
  MPI := $(shell command -v mpicc >/dev/null 2>&1 && echo 1 || echo 0)
endif
ifeq ($(MPI),1)
  BUILD ?= build-mpi
endif
BUILD   ?= build
SAN     ?=
OPT     ?= -O2
GIT_DEF := -DDF_GIT_COMMIT='"$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)"'
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration $(OPT) -g \
                 -fno-omit-frame-pointer -Iinclude -Isrc -I. -pthread \
                 $(GIT_DEF)
ifeq ($(SAN),1)
  CFLAGS_COMMON += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN := -fsanitize=address,undefined
endif
ARCH := $(shell uname -m)
# The engine's own libraries (what a program embedding libdeltafin.a links: tests/test_embed.sh)
# and the application's (HTTP server, downloads, config file), linked only into the CLI.
ENGINE_LIBS := -lpcre2-8 -lcjson -lxxhash -lm -lpthread
APP_LIBS    := -lmicrohttpd -lyaml -lcurl -lcrypto -ledit
HAVE_URING := $(shell test -f /usr/include/liburing.h && echo 1)
ifeq ($(HAVE_URING),1)
  CFLAGS_COMMON += -DDF_HAVE_URING=1
  ENGINE_LIBS += -luring
endif
LIBS := $(APP_LIBS) $(ENGINE_LIBS)

# The engine (src/*/: base format kernels model weights forward runtime text) is
# libdeltafin.a; the application layer (app/: CLI, server, config, download) is
# libdeltafin-app.a, linked into the `deltafin` binary (and the tests); the dev tools (dev/:
# gen-random, llama2.c import) are their own binary, `deltafin-dev`, on the engine alone.
LIB_SRC  := $(sort $(wildcard src/*/*.c))
ifneq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out src/kernels/x86_%.c,$(LIB_SRC))
endif
ifneq ($(ARCH),aarch64)
  LIB_SRC := $(filter-out src/kernels/arm_%.c,$(LIB_SRC))
endif
DIST_MPI_SRC := src/dist/world.c src/dist/remote.c src/dist/worker.c
ifeq ($(MPI),1)
  CC := mpicc
  CFLAGS_COMMON += -DDF_HAVE_MPI=1
  LIB_SRC := $(filter-out src/dist/none.c,$(LIB_SRC))
else
  LIB_SRC := $(filter-out $(DIST_MPI_SRC),$(LIB_SRC))
endif
TOOL_SRC := $(sort $(wildcard app/*.c app/cli/*.c))
DEV_SRC  := $(sort $(wildcard dev/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
DEV_OBJ  := $(DEV_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIBA     := $(BUILD)/libdeltafin.a
APPA     := $(BUILD)/libdeltafin-app.a
BIN      := $(BUILD)/deltafin
DEVBIN   := $(BUILD)/deltafin-dev

# Per-file ISA flags: SIMD kernels are compiled for their ISA and chosen at run time.
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c -mavx2
$(BUILD)/src/kernels/x86_avx2.o $(BUILD)/src/kernels/x86_avx2_f32.o:     ISAFLAGS := $(AVX2_FLAGS)
$(BUILD)/src/kernels/x86_avx512.o $(BUILD)/src/kernels/x86_avx512_kq.o $(BUILD)/src/kernels/x86_avx512_f32.o: ISAFLAGS := $(AVX512_FLAGS)
$(BUILD)/src/kernels/arm_neon.o:   ISAFLAGS := -march=armv8.2-a+dotprod+fp16

.PHONY: all lib cli dev tests test test-unit demo bench asan ubsan fuzz clean deps check-deps install uninstall
all: check-deps lib cli dev tests
lib: $(LIBA) $(BUILD)/deltafin.pc
cli: $(BIN)
dev: $(DEVBIN)
tests: $(TEST_BIN)

DEPS_ARGS := $(if $(filter 1,$(MPI)),--mpi)
check-deps:
	@sh scripts/deps.sh --check $(DEPS_ARGS) >/dev/null 2>&1 || sh scripts/deps.sh $(DEPS_ARGS)

deps:
	sh scripts/deps.sh $(DEPS_ARGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(ISAFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# deltafin_commit() is compiled into api.o: rebuild it when HEAD moves (the stamp changes only then)
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
$(BUILD)/commit.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(COMMIT)' | cmp -s - $@ || echo '$(COMMIT)' > $@
$(BUILD)/src/runtime/api.o: $(BUILD)/commit.stamp
FORCE:

# pkg-config description of the installed library (PREFIX is substituted at install)
$(BUILD)/deltafin.pc: Makefile
	@mkdir -p $(dir $@)
	@printf 'prefix=@PREFIX@\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: deltafin\nDescription: %s\nVersion: %s\nCflags: -I$${includedir}\nLibs: -L$${libdir} -ldeltafin\nLibs.private: %s\n' \
	  'Mixture-of-Experts inference larger than RAM' \
	  "$$(sed -n 's/^#define DELTAFIN_VERSION "\(.*\)"/\1/p' include/deltafin.h)" '$(ENGINE_LIBS)' > $@

$(APPA): $(filter-out $(BUILD)/app/cli/main.o,$(TOOL_OBJ))
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/app/cli/main.o $(APPA) $(LIBA)
	$(CC) $(LDSAN) -o $@ $(BUILD)/app/cli/main.o $(APPA) $(LIBA) $(LIBS) $(LDFLAGS)

# the dev tools: the engine and its libraries only (like an embedding program)
$(DEVBIN): $(DEV_OBJ) $(LIBA)
	$(CC) $(LDSAN) -o $@ $(DEV_OBJ) $(LIBA) $(ENGINE_LIBS) $(LDFLAGS)

$(BUILD)/tests/%: tests/%.c $(LIBA) $(APPA) tests/testlib.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS) -Itests -o $@ $< $(APPA) $(LIBA) $(LIBS) $(LDSAN) $(LDFLAGS)

# The README's test command: unit tests, tool-level tests, corpus replays.
test: all
	@sh scripts/run_tests.sh $(BUILD)

# Same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan ubsan:
	$(MAKE) BUILD=build-asan SAN=1 OPT=-O1 all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  sh scripts/run_tests.sh build-asan

demo: all
	@sh scripts/demo.sh $(BUILD)

bench: all
	$(BIN) bench kernels

# libFuzzer targets (clang); corpora in fuzz/corpus/<target>/ are replayed by `make test`;
# scripts/fuzz_run.sh TARGET MINUTES runs one and grows its corpus (fuzz/runs.tsv).
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
fuzz: $(FUZZ_BIN)
FUZZ_APP := app/server.c app/server_parse.c app/server_stream.c app/config.c app/server_agents.c app/server_web.c
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc -I. \
  $(GIT_DEF) $(if $(HAVE_URING),-DDF_HAVE_URING=1)
# the SIMD kernels with their ISA flags, each alone (as in the normal build): ISA flags on every
# file let the compiler use AVX-512 anywhere, and the fuzzers died of SIGILL on AVX2 machines
FUZZ_ISA_SRC := $(filter src/kernels/x86_% src/kernels/arm_%,$(LIB_SRC))
FUZZ_ISA_OBJ := $(FUZZ_ISA_SRC:src/kernels/%.c=build-fuzz/isa/%.o)
build-fuzz/isa/x86_avx2.o build-fuzz/isa/x86_avx2_f32.o: FUZZ_ISA := $(AVX2_FLAGS)
build-fuzz/isa/x86_avx512.o build-fuzz/isa/x86_avx512_kq.o build-fuzz/isa/x86_avx512_f32.o: FUZZ_ISA := $(AVX512_FLAGS)
build-fuzz/isa/arm_neon.o: FUZZ_ISA := -march=armv8.2-a+dotprod+fp16
build-fuzz/isa/%.o: src/kernels/%.c
	@mkdir -p build-fuzz/isa
	clang $(FUZZ_CFLAGS) $(FUZZ_ISA) -c $< -o $@
build-fuzz/%: fuzz/%.c $(filter-out $(FUZZ_ISA_SRC),$(LIB_SRC)) $(FUZZ_APP) $(FUZZ_ISA_OBJ)
	@mkdir -p build-fuzz
	clang $(FUZZ_CFLAGS) -o $@ $< $(filter-out $(FUZZ_ISA_SRC),$(LIB_SRC)) $(FUZZ_APP) $(FUZZ_ISA_OBJ) $(LIBS)

# make install PREFIX=/usr/local (DESTDIR for staged installs): the CLI, the library, its headers
# and a pkg-config file. An embedding program: cc app.c $$(pkg-config --cflags --libs --static deltafin)
PREFIX ?= /usr/local
install: $(BIN) $(LIBA) $(BUILD)/deltafin.pc
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/deltafin
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/libdeltafin.a
	install -m 644 include/deltafin.h include/deltafin_debug.h $(DESTDIR)$(PREFIX)/include/
	sed 's|@PREFIX@|$(PREFIX)|' $(BUILD)/deltafin.pc > $(DESTDIR)$(PREFIX)/lib/pkgconfig/deltafin.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/deltafin $(DESTDIR)$(PREFIX)/lib/libdeltafin.a \
	  $(DESTDIR)$(PREFIX)/include/deltafin.h $(DESTDIR)$(PREFIX)/include/deltafin_debug.h \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/deltafin.pc

clean:
	rm -rf build build-asan build-fuzz build-mpi

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d) $(DEV_OBJ:.o=.d)
