// DeviceBuffer: device memory owned by RAII; memory_info: what the device has free.
#include <utility>

#include "device/cuda_api.h"
#include "device/driver.h"

namespace tessel::device {

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const detail::DriverApi& api = detail::bind_context();
  CUdeviceptr p = 0;
  if (CUresult r = api.cuMemAlloc(&p, bytes); r != CUDA_SUCCESS) {
    throw DriverError(static_cast<int>(r),
                      "allocating " + std::to_string(bytes) +
                          " bytes of device memory failed: " + detail::describe(r));
  }
  ptr_ = p;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  // A destructor cannot report an error; at process exit the driver may already be shut down
  // (CUDA_ERROR_DEINITIALIZED), which frees the memory anyway.
  try {
    detail::bind_context().cuMemFree(ptr_);
  } catch (const Error&) {
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));  // frees the current allocation on scope exit
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  TESSEL_ICHECK(offset <= size_ && bytes <= size_ - offset)
      << "upload of " << bytes << " bytes at " << offset << " into a buffer of " << size_;
  if (bytes == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemcpyHtoD(ptr_ + offset, src, bytes));
}

void DeviceBuffer::upload_async(const void* src, size_t bytes, size_t offset, void* stream) {
  TESSEL_ICHECK(offset <= size_ && bytes <= size_ - offset)
      << "upload of " << bytes << " bytes at " << offset << " into a buffer of " << size_;
  if (bytes == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemcpyHtoDAsync(ptr_ + offset, src, bytes,
                                                           static_cast<CUstream>(stream)));
}

void DeviceBuffer::download_async(void* dst, size_t bytes, void* stream) const {
  TESSEL_ICHECK(bytes <= size_) << "download of " << bytes << " bytes from a buffer of " << size_;
  if (bytes == 0) return;
  TESSEL_CU_CHECK(
      detail::bind_context().cuMemcpyDtoHAsync(dst, ptr_, bytes, static_cast<CUstream>(stream)));
}

PinnedBuffer::PinnedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const detail::DriverApi& api = detail::bind_context();
  void* p = nullptr;
  if (CUresult r = api.cuMemHostAlloc(&p, bytes, 0); r != CUDA_SUCCESS) {
    throw DriverError(static_cast<int>(r), "pinning " + std::to_string(bytes) +
                                               " bytes of host memory failed: " +
                                               detail::describe(r));
  }
  data_ = static_cast<std::byte*>(p);
}

PinnedBuffer::~PinnedBuffer() {
  if (!data_) return;
  try {
    detail::bind_context().cuMemFreeHost(data_);
  } catch (const Error&) {
  }
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    PinnedBuffer old(std::move(*this));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void DeviceBuffer::download(void* dst, size_t bytes) const {
  TESSEL_ICHECK(bytes <= size_) << "download of " << bytes << " bytes from a buffer of " << size_;
  if (bytes == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemcpyDtoH(dst, ptr_, bytes));
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  if (bytes == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemcpyDtoH(dst, src, bytes));
}

void copy_on_device(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  TESSEL_CU_CHECK(
      detail::bind_context().cuMemcpyDtoDAsync(dst, src, bytes, static_cast<CUstream>(stream)));
}

void copy_async(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  TESSEL_CU_CHECK(
      detail::bind_context().cuMemcpyAsync(dst, src, bytes, static_cast<CUstream>(stream)));
}

void copy(uint64_t dst, uint64_t src, size_t bytes) {
  if (bytes == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemcpy(dst, src, bytes));
}

Stream::Stream() {
  CUstream s = nullptr;
  TESSEL_CU_CHECK(detail::bind_context().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  stream_ = s;
}

Stream::~Stream() {
  try {  // at process exit the driver may already be gone
    const detail::DriverApi& api = detail::bind_context();
    api.cuStreamSynchronize(static_cast<CUstream>(stream_));
    api.cuStreamDestroy(static_cast<CUstream>(stream_));
  } catch (const Error&) {
  }
}

void Stream::synchronize() const {
  TESSEL_CU_CHECK(detail::bind_context().cuStreamSynchronize(static_cast<CUstream>(stream_)));
}

Event::Event() {
  CUevent e = nullptr;
  TESSEL_CU_CHECK(detail::bind_context().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  event_ = e;
}

Event::~Event() {
  try {
    detail::bind_context().cuEventDestroy(static_cast<CUevent>(event_));
  } catch (const Error&) {
  }
}

void Event::record(void* stream) {
  TESSEL_CU_CHECK(detail::bind_context().cuEventRecord(static_cast<CUevent>(event_),
                                                       static_cast<CUstream>(stream)));
}

void Event::make_wait(void* stream) const {
  TESSEL_CU_CHECK(detail::bind_context().cuStreamWaitEvent(static_cast<CUstream>(stream),
                                                           static_cast<CUevent>(event_), 0));
}

void Event::synchronize() const {
  TESSEL_CU_CHECK(detail::bind_context().cuEventSynchronize(static_cast<CUevent>(event_)));
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (size_ == 0) return;
  TESSEL_CU_CHECK(detail::bind_context().cuMemsetD8(ptr_, value, size_));
}

MemoryInfo memory_info() {
  MemoryInfo m;
  TESSEL_CU_CHECK(detail::bind_context().cuMemGetInfo(&m.free, &m.total));
  return m;
}

}  // namespace tessel::device
