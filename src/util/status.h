// Status and Result<T>: how anything that comes from outside (a file, JSON, text) reports failure with context.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace parallm {

// A failure with a human-readable message; `ok()` when there is none.
class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Prefixes context, e.g. the file name: "model.gguf: tensor 'x' extends past the end of the file".
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Error(context + ": " + message_);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// Formats an error Status: `return Err("tensor '{}' has {} dims", name, n);`
template <typename... Args>
Status Err(fmt::format_string<Args...> format, Args&&... args) {
  return Status::Error(fmt::format(format, std::forward<Args>(args)...));
}

// A value or the Status that says why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(value_).ok()) {
      fmt::print(stderr, "internal error: Result constructed from an ok Status\n");
      std::abort();
    }
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return Get(); }
  const T& value() const& { return const_cast<Result*>(this)->Get(); }
  T&& value() && { return std::move(Get()); }
  T* operator->() { return &Get(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Get(); }
  T& operator*() { return Get(); }

 private:
  T& Get() {
    if (!ok()) {
      fmt::print(stderr, "internal error: value() of a failed Result: {}\n", std::get<Status>(value_).message());
      std::abort();
    }
    return std::get<T>(value_);
  }
  std::variant<T, Status> value_;
};

}  // namespace parallm

// Returns the Status of `expr` from the enclosing function when it failed.
#define PARALLM_RETURN_IF_ERROR(expr)         \
  do {                                        \
    ::parallm::Status _st = (expr);           \
    if (!_st.ok()) return _st;                \
  } while (0)

#define PARALLM_CONCAT_INNER(a, b) a##b
#define PARALLM_CONCAT(a, b) PARALLM_CONCAT_INNER(a, b)
// `PARALLM_ASSIGN_OR_RETURN(auto file, GgufFile::Open(path));`
#define PARALLM_ASSIGN_OR_RETURN(lhs, expr) PARALLM_ASSIGN_OR_RETURN_IMPL(PARALLM_CONCAT(_res_, __LINE__), lhs, expr)
#define PARALLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
