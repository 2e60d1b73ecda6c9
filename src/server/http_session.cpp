// HttpSession: the per-connection read / answer / write cycle, with the disconnect watch and timeouts.
#include "server/http_session.h"

#include <fmt/format.h>

#include <boost/json.hpp>

namespace parallm::server {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr size_t kMaxWatchedBytes = 1u << 20;  // a pipelining client may queue this much while we answer
// A streaming client that stops reading while its request generates: past this backlog it is treated as gone
// (its request is cancelled) rather than let the server's memory grow with everything it does not read.
constexpr size_t kMaxWriteBacklog = 16u << 20;

std::string ErrorJson(const std::string& message, const std::string& type) {
  boost::json::object e{{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  return boost::json::serialize(boost::json::object{{"error", e}});
}

}  // namespace

std::string ResponseHead(int status, const Headers& headers) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
  for (const auto& [name, value] : headers) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
  head += "\r\n";
  return head;
}

HttpSession::HttpSession(asio::ip::tcp::socket socket, HttpHandler& handler, const HttpLimits& limits)
    : socket_(std::move(socket)), handler_(handler), limits_(limits), timer_(socket_.get_executor()) {}

void HttpSession::Start() {
  error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);  // SSE chunks are small and latency matters
  ReadHeader();
}

size_t HttpSession::pending_write_bytes() const {
  size_t n = writing_buffer_.size();
  for (const std::string& s : queue_) n += s.size();
  return n;
}

void HttpSession::StartTimer() {
  timed_out_ = false;
  timer_.expires_after(limits_.request_timeout);
  timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->closed_ || !self->reading_) return;  // cancelled: the request arrived in time
    self->timed_out_ = true;
    error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void HttpSession::ReadHeader() {
  if (closed_) return;
  answering_ = answer_complete_ = streaming_ = false;
  on_disconnect_ = nullptr;
  reading_ = true;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  StartTimer();
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
}

void HttpSession::OnHeader(error_code ec) {
  if (closed_) return;
  if (ec) return OnBody(ec);
  const auto& req = parser_->get();
  // Content-Length over the limit: refuse before reading the body.
  if (auto len = parser_->content_length(); len && *len > limits_.max_body_bytes) return OnBody(http::error::body_limit);
  if (boost::beast::iequals(req[http::field::expect], "100-continue"))
    Enqueue("HTTP/1.1 100 Continue\r\n\r\n");  // curl waits for this before sending a large body
  if (parser_->is_done()) return OnBody({});
  http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec2, size_t) { self->OnBody(ec2); });
}

void HttpSession::OnBody(error_code ec) {
  if (closed_) return;
  reading_ = false;
  timer_.cancel();
  if (timed_out_) {
    // Stalled: mid-request gets a 408, an idle keep-alive connection is just closed.
    if (parser_->got_some() || buffer_.size() > 0)
      return ReplyAndClose(408, "The request was not received in time", "timeout_error");
    return Close(false);
  }
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) {
    return Close(false);
  }
  if (ec == http::error::body_limit)
    return ReplyAndClose(413, fmt::format("The request body is larger than the limit of {} bytes", limits_.max_body_bytes),
                         "invalid_request_error");
  if (ec == http::error::header_limit)
    return ReplyAndClose(431, "The request headers are too large", "invalid_request_error");
  if (ec) {
    if (!parser_->got_some() && buffer_.size() == 0) return Close(false);
    return ReplyAndClose(400, fmt::format("Malformed HTTP request: {}", ec.message()), "invalid_request_error");
  }
  Dispatch();
}

void HttpSession::Dispatch() {
  HttpRequest request = parser_->release();
  keep_alive_ = keep_alive_ && request.keep_alive();
  answering_ = true;
  handler_.Handle(shared_from_this(), std::move(request));
  // The handler answers later: watch the socket meanwhile, so a disconnect cancels the work.
  if (answering_ && !answer_complete_ && !closed_) Watch();
}

void HttpSession::Reply(int status, std::string_view content_type, std::string body, const Headers& headers) {
  if (closed_ || !answering_ || answer_complete_) return;
  Headers all{{"Content-Type", std::string(content_type)},
              {"Content-Length", std::to_string(body.size())},
              {"Connection", keep_alive_ ? "keep-alive" : "close"}};
  all.insert(all.end(), headers.begin(), headers.end());
  std::string bytes = ResponseHead(status, all);
  bytes += body;
  answer_complete_ = true;
  Enqueue(std::move(bytes));
}

void HttpSession::StartEventStream(const Headers& headers) {
  if (closed_ || !answering_ || answer_complete_ || streaming_) return;
  streaming_ = true;
  Headers all{{"Content-Type", "text/event-stream; charset=utf-8"},
              {"Cache-Control", "no-cache"},
              {"Transfer-Encoding", "chunked"},
              {"Connection", keep_alive_ ? "keep-alive" : "close"}};
  all.insert(all.end(), headers.begin(), headers.end());
  Enqueue(ResponseHead(200, all));
}

void HttpSession::SendEvent(std::string event) {
  if (closed_ || !streaming_ || answer_complete_ || event.empty()) return;
  if (pending_write_bytes() > kMaxWriteBacklog) return Close(true);
  // One HTTP chunk per event: "<size in hex>\r\n<bytes>\r\n".
  std::string chunk = fmt::format("{:x}\r\n", event.size());
  chunk += event;
  chunk += "\r\n";
  Enqueue(std::move(chunk));
}

void HttpSession::EndEventStream() {
  if (closed_ || !streaming_ || answer_complete_) return;
  answer_complete_ = true;
  Enqueue("0\r\n\r\n");
}

void HttpSession::ReplyAndClose(int status, const std::string& message, const std::string& type) {
  keep_alive_ = false;
  answering_ = true;
  answer_complete_ = false;
  streaming_ = false;
  Reply(status, "application/json", ErrorJson(message, type));
}

void HttpSession::Enqueue(std::string bytes) {
  queue_.push_back(std::move(bytes));
  if (!writing_) WriteNext();
}

void HttpSession::WriteNext() {
  writing_buffer_.clear();
  while (!queue_.empty()) {
    writing_buffer_ += queue_.front();
    queue_.pop_front();
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(writing_buffer_),
                    [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(ec); });
}

void HttpSession::OnWritten(error_code ec) {
  writing_ = false;
  if (closed_) return;
  if (ec) return Close(true);
  if (!queue_.empty()) return WriteNext();
  if (answering_ && answer_complete_) AnswerDone();
}

void HttpSession::AnswerDone() {
  answering_ = false;
  on_disconnect_ = nullptr;
  if (!keep_alive_) return LingeringClose();
  if (watching_) {
    // The watch read must end before the next request is read; it resumes reading when cancelled.
    read_after_watch_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  ReadHeader();
}

void HttpSession::Watch() {
  if (watching_ || closed_ || buffer_.size() >= kMaxWatchedBytes) return;
  watching_ = true;
  socket_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](error_code ec, size_t n) { self->OnWatch(ec, n); });
}

void HttpSession::OnWatch(error_code ec, size_t n) {
  watching_ = false;
  if (closed_) return;
  if (!ec) buffer_.commit(n);
  if (read_after_watch_) {
    read_after_watch_ = false;
    if (!ec || ec == asio::error::operation_aborted) return ReadHeader();
  }
  if (ec == asio::error::operation_aborted) return;
  if (ec) return Close(true);  // EOF or reset while answering: the client went away
  if (answering_) Watch();     // a pipelined request: keep its bytes and keep watching
}

void HttpSession::Close(bool client_gone) {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (auto callback = std::move(on_disconnect_); callback && answering_ && client_gone) callback();
  on_disconnect_ = nullptr;
}

void HttpSession::LingeringClose() {
  // Half-close, then read and discard what the client still sends for a moment, so that closing with unread
  // bytes (e.g. the rest of an oversized body) does not reset the connection before it has read our answer.
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  timer_.expires_after(std::chrono::seconds(2));
  timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->Close(false);
  });
  DiscardInput();
}

void HttpSession::DiscardInput() {
  buffer_.consume(buffer_.size());
  socket_.async_read_some(buffer_.prepare(16384), [self = shared_from_this()](error_code ec, size_t) {
    if (self->closed_) return;
    if (ec) return self->Close(false);
    self->DiscardInput();
  });
}

}  // namespace parallm::server
