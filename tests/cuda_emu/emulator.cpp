// The CUDA emulator: runs drift's kernels on the CPU, thread by thread, so that CI executes the
// device code on a machine without a GPU (include/cuda_runtime.h says what this can and cannot show).
//
// A launch runs its blocks one after another on the calling thread. A block's threads are fibers
// (own stack, a hand-written context switch): each runs until it finishes or waits at a barrier
// (__syncthreads, or a warp shuffle, which waits for its warp), and the scheduler releases a barrier
// once every thread it concerns has arrived. Threads that wait at different barriers are a kernel
// bug the hardware would hang or misbehave on; here the launch fails with a message naming it.
//
// Device memory is host memory the runtime keeps a registry of: copies and memsets are checked
// against it (a copy past an allocation's end, or a host pointer where a device one is expected, is
// an error as on the device), and new allocations are filled with 0xff bytes (NaN as a double) so a
// kernel reading memory nothing wrote shows it.
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime.h>

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

// The context switch: saves the callee-saved registers on the current stack, stores the stack
// pointer in *save, and resumes the stack `load` (System V x86-64). The floating-point control words
// (also callee-saved) are not switched: fibers run on the launching thread and kernels never change
// them, so every fiber keeps the launching thread's rounding mode and flush setting.
extern "C" void drift_emu_switch(void** save, void* load);
asm(R"(
  .pushsection .text
  .globl drift_emu_switch
  .type drift_emu_switch, @function
drift_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size drift_emu_switch, .-drift_emu_switch
  .popsection
)");

namespace drift_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;  // per thread; a guard page below each
constexpr unsigned kWarp = 32;

enum class Wait : uint8_t { running, block_barrier, warp_barrier, done };

struct Fiber {
  void* sp = nullptr;
  Wait wait = Wait::running;
  uint64_t shuffles = 0;  // shuffles this lane has entered: a warp's lanes must agree
  bool vote = false;      // its predicate at the __syncthreads_or it waits at
  dim3 idx;
};

// One block in flight on this OS thread.
struct Block {
  std::vector<Fiber> fibers;
  std::vector<std::array<uint64_t, 2 * kWarp>> slots;  // per warp: two generations of lane values
  void* scheduler_sp = nullptr;
  size_t current = 0;
  void (*thunk)(void*) = nullptr;
  void* body = nullptr;
  std::string error;  // first misuse seen in this launch
  bool barrier_or = false;  // the last released barrier's OR of the votes (__syncthreads_or)
};

thread_local Block t_block;
thread_local std::vector<char*> t_stacks;  // reused from launch to launch

// The order threads and blocks take turns in: a correct kernel's results cannot depend on it (CI
// runs training under the reversed order; DRIFT_CUDA_EMU_SCHEDULE=reverse, or set_schedule).
Schedule& schedule() {
  static Schedule s = [] {
    const char* env = std::getenv("DRIFT_CUDA_EMU_SCHEDULE");
    return env && std::string(env) == "reverse" ? Schedule::reverse : Schedule::forward;
  }();
  return s;
}
size_t scheduled(size_t i, size_t count) { return schedule() == Schedule::reverse ? count - 1 - i : i; }

// The device's state. Like the backend that calls it, it expects one host thread at a time.
struct Runtime {
  std::map<uintptr_t, size_t> allocations;  // device address -> bytes
  cudaError_t sticky = cudaSuccess;
  std::string message;
};
Runtime& runtime() {
  static Runtime r;
  return r;
}

cudaError_t fail(cudaError_t e, const std::string& why) {
  runtime().message = why;
  std::fprintf(stderr, "cuda emulator: %s\n", why.c_str());
  return e;
}

char* stack_for(size_t i) {
  while (t_stacks.size() <= i) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("cuda emulator: mmap");
      std::abort();
    }
    mprotect(p, page, PROT_NONE);  // an overflowing thread faults instead of corrupting its neighbour
    t_stacks.push_back(static_cast<char*>(p) + page);
  }
  return t_stacks[i];
}

[[noreturn]] void fiber_main() {
  Block& b = t_block;
  b.thunk(b.body);
  b.fibers[b.current].wait = Wait::done;
  void* unused;
  drift_emu_switch(&unused, b.scheduler_sp);
  __builtin_unreachable();
}

// A fresh stack that drift_emu_switch resumes into fiber_main, entered as if called (the return
// address slot 16-byte aligned).
void* initial_stack(char* base) {
  auto top = reinterpret_cast<uintptr_t>(base + kStackBytes) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<uint64_t*>(top - 16);  // fiber_main's return address slot
  slot[0] = reinterpret_cast<uint64_t>(&fiber_main);
  slot[1] = 0;
  uint64_t* sp = slot - 6;  // r15, r14, r13, r12, rbx, rbp
  std::memset(sp, 0, 6 * sizeof(uint64_t));
  return sp;
}

enum class Release { none, released, deadlock };

// Lets the lanes of warp [w0, w1) go once all of them wait at the same shuffle.
Release release_warp(Block& b, size_t w0, size_t w1) {
  size_t at_shuffle = 0, finished = 0;
  for (size_t t = w0; t < w1; ++t) {
    at_shuffle += b.fibers[t].wait == Wait::warp_barrier;
    finished += b.fibers[t].wait == Wait::done;
  }
  if (at_shuffle == 0) return Release::none;
  const std::string lanes = " (threads " + std::to_string(w0) + ".." + std::to_string(w1 - 1) + ")";
  if (finished) b.error = "a warp shuffle waits for lanes that have exited" + lanes;
  else if (at_shuffle != w1 - w0) b.error = "lanes of a warp wait at a shuffle and at __syncthreads" + lanes;
  for (size_t t = w0 + 1; t < w1 && b.error.empty(); ++t)
    if (b.fibers[t].shuffles != b.fibers[w0].shuffles) b.error = "lanes of a warp are at different shuffles" + lanes;
  if (!b.error.empty()) return Release::deadlock;
  for (size_t t = w0; t < w1; ++t) b.fibers[t].wait = Wait::running;
  return Release::released;
}

// Runs one block to completion: warp by warp up to the next __syncthreads (a warp's shuffles are
// released as soon as its lanes have all arrived, which keeps 32 stacks hot), then the barrier.
bool run_block(Block& b, dim3 block) {
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  b.fibers.assign(n, Fiber{});
  b.slots.assign((n + kWarp - 1) / kWarp, {});
  for (size_t t = 0; t < n; ++t) {
    Fiber& f = b.fibers[t];
    f.idx = dim3(static_cast<unsigned>(t % block.x), static_cast<unsigned>(t / block.x % block.y),
                 static_cast<unsigned>(t / (static_cast<size_t>(block.x) * block.y)));
    f.sp = initial_stack(stack_for(t));
  }
  const size_t warps = (n + kWarp - 1) / kWarp;
  for (;;) {
    for (size_t wi = 0; wi < warps; ++wi) {
      const size_t w0 = scheduled(wi, warps) * kWarp, w1 = std::min(n, w0 + kWarp);
      Release r;
      do {
        for (size_t li = 0; li < w1 - w0; ++li) {
          const size_t t = w0 + scheduled(li, w1 - w0);
          Fiber& f = b.fibers[t];
          if (f.wait != Wait::running) continue;
          b.current = t;
          threadIdx = f.idx;
          drift_emu_switch(&b.scheduler_sp, f.sp);
        }
        r = release_warp(b, w0, w1);
      } while (r == Release::released);
      if (r == Release::deadlock) return false;
    }
    // Every thread has finished or waits at __syncthreads.
    size_t at_sync = 0;
    for (const Fiber& f : b.fibers) at_sync += f.wait == Wait::block_barrier;
    if (at_sync == 0) return true;
    if (at_sync != n) {
      b.error = "__syncthreads waits for threads that have exited";
      return false;
    }
    // Each thread reads the result as it resumes, before it can reach the next barrier.
    b.barrier_or = false;
    for (Fiber& f : b.fibers) {
      b.barrier_or = b.barrier_or || f.vote;
      f.vote = false;
      f.wait = Wait::running;
    }
  }
}

void suspend(Wait why) {
  Block& b = t_block;
  Fiber& f = b.fibers[b.current];
  f.wait = why;
  drift_emu_switch(&f.sp, b.scheduler_sp);
}

// The allocation holding [p, p + bytes), or nullptr.
bool device_range(const void* p, size_t bytes) {
  const auto& a = runtime().allocations;
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(u);
  if (it == a.begin()) return false;
  --it;
  return u >= it->first && u + bytes <= it->first + it->second;
}

cudaError_t check_copy(const void* dst, const void* src, size_t dst_span, size_t src_span, cudaMemcpyKind kind,
                       const char* what) {
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev && !device_range(dst, dst_span))
    return fail(cudaErrorInvalidValue, std::string(what) + ": the destination is not " + std::to_string(dst_span) +
                                           " bytes of device memory");
  if (src_dev && !device_range(src, src_span))
    return fail(cudaErrorInvalidValue, std::string(what) + ": the source is not " + std::to_string(src_span) +
                                           " bytes of device memory");
  if (!dst_dev && device_range(dst, 1))
    return fail(cudaErrorInvalidValue, std::string(what) + ": a device pointer as the host destination");
  if (!src_dev && device_range(src, 1))
    return fail(cudaErrorInvalidValue, std::string(what) + ": a device pointer as the host source");
  return cudaSuccess;
}

}  // namespace

void set_schedule(Schedule s) { schedule() = s; }

void syncthreads() { suspend(Wait::block_barrier); }

bool syncthreads_or(bool predicate) {
  Block& b = t_block;
  b.fibers[b.current].vote = predicate;
  suspend(Wait::block_barrier);
  return b.barrier_or;
}

void shuffle_down(unsigned mask, const void* value, void* out, size_t bytes, unsigned delta) {
  Block& b = t_block;
  const size_t t = b.current, w0 = t / kWarp * kWarp, lanes = std::min<size_t>(kWarp, b.fibers.size() - w0);
  const unsigned full = lanes == kWarp ? 0xffffffffu : (1u << lanes) - 1;
  if (mask != full && b.error.empty()) b.error = "a shuffle whose mask is not the whole warp (not emulated)";
  Fiber& f = b.fibers[t];
  // Two generations of slots: a lane writes generation g + 2 only after every lane passed g + 1,
  // that is, after every lane has read generation g.
  const size_t gen = f.shuffles++ & 1, lane = t - w0;
  auto& slots = b.slots[t / kWarp];
  std::memcpy(&slots[gen * kWarp + lane], value, bytes);
  suspend(Wait::warp_barrier);
  const size_t src = lane + delta;
  std::memcpy(out, src < lanes ? static_cast<const void*>(&slots[gen * kWarp + src]) : value, bytes);
}

void run_grid(dim3 grid, dim3 block, size_t shared_bytes, void (*thunk)(void*), void* body, const char* name) {
  const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || shared_bytes > 0) {
    runtime().sticky = fail(cudaErrorInvalidConfiguration,
                            std::string("launch of ") + name + ": invalid configuration (grid " + std::to_string(grid.x) +
                                "x" + std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block " +
                                std::to_string(threads) + " threads, " + std::to_string(shared_bytes) +
                                " bytes of dynamic shared memory)");
    return;
  }
  Block& b = t_block;
  b.thunk = thunk;
  b.body = body;
  b.error.clear();
  gridDim = grid;
  blockDim = block;
  for (unsigned zi = 0; zi < grid.z; ++zi)
    for (unsigned yi = 0; yi < grid.y; ++yi)
      for (unsigned xi = 0; xi < grid.x; ++xi) {
        const auto x = static_cast<unsigned>(scheduled(xi, grid.x)), y = static_cast<unsigned>(scheduled(yi, grid.y)),
                   z = static_cast<unsigned>(scheduled(zi, grid.z));
        blockIdx = dim3(x, y, z);
        if (!run_block(b, block) || !b.error.empty()) {
          runtime().sticky = fail(cudaErrorLaunchFailure, std::string("kernel ") + name + ", block (" +
                                                              std::to_string(x) + "," + std::to_string(y) + "," +
                                                              std::to_string(z) + "): " + b.error);
          return;
        }
      }
}

}  // namespace drift_emu

using drift_emu::fail;
using drift_emu::runtime;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidValue, "cudaSetDevice: the emulator has device 0 only");
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }  // launches complete before they return

const char* cudaGetErrorString(cudaError_t e) {
  if (e == cudaSuccess) return "no error";
  return runtime().message.empty() ? "emulated CUDA error" : runtime().message.c_str();
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = runtime().sticky;
  runtime().sticky = cudaSuccess;
  return e;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  void* q = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!q) return fail(cudaErrorMemoryAllocation, "cudaMalloc: out of memory");
  std::memset(q, 0xff, bytes);
  runtime().allocations[reinterpret_cast<uintptr_t>(q)] = bytes;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  if (runtime().allocations.erase(reinterpret_cast<uintptr_t>(p)) == 0)
    return fail(cudaErrorInvalidDevicePointer, "cudaFree: not an allocation's start");
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (auto e = drift_emu::check_copy(dst, src, bytes, bytes, kind, "cudaMemcpy"); e != cudaSuccess) return e;
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (width > dpitch || width > spitch) return fail(cudaErrorInvalidValue, "cudaMemcpy2D: width exceeds a pitch");
  const size_t dspan = (height - 1) * dpitch + width, sspan = (height - 1) * spitch + width;
  if (auto e = drift_emu::check_copy(dst, src, dspan, sspan, kind, "cudaMemcpy2D"); e != cudaSuccess) return e;
  for (size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!drift_emu::device_range(p, bytes))
    return fail(cudaErrorInvalidValue, "cudaMemset: not " + std::to_string(bytes) + " bytes of device memory");
  std::memset(p, value, bytes);
  return cudaSuccess;
}
