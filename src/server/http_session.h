// HttpSession: one client connection on the server's io_context: reads HTTP/1.1 requests (keep-alive, a body
// limit, a timeout for stalled and idle clients), hands each to the HttpHandler, and writes its answer: one
// response, or a server-sent event stream in chunked encoding. While an answer is being produced it keeps a read
// pending on the socket, so a client that goes away is noticed at once, between stream chunks or while a
// non-streamed answer is still generating, and the handler is told (it cancels the generation).
//
// Threading: every method runs on the io_context's thread (the server runs one); others post to it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace parallm::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  size_t max_body_bytes = 32u << 20;
  size_t max_header_bytes = 64u << 10;
  // A client has this long to send a whole request after the previous answer (or the connection) began:
  // an idle keep-alive connection is closed after it, a request stalled half-way gets 408.
  std::chrono::milliseconds request_timeout{5000};
};

class HttpSession;

// The application: one call per complete request. It answers through the session, at once or later.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(const std::shared_ptr<HttpSession>& session, HttpRequest request) = 0;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, HttpHandler& handler, const HttpLimits& limits);
  void Start();

  // A whole response. `headers` are added to Content-Type, Content-Length and Connection.
  void Reply(int status, std::string_view content_type, std::string body, const Headers& headers = {});
  // An event stream: StartEventStream sends the 200 and its headers, SendEvent one event (bytes already framed
  // as SSE, e.g. "data: {...}\n\n"), EndEventStream the end of the response.
  void StartEventStream(const Headers& headers = {});
  void SendEvent(std::string event);
  void EndEventStream();

  // Called once, on the io thread, when the client goes away before the current answer is complete.
  void OnDisconnect(std::function<void()> callback) { on_disconnect_ = std::move(callback); }
  bool closed() const { return closed_; }
  // After the current answer, close instead of reading another request (server shutting down).
  void CloseAfterAnswer() { keep_alive_ = false; }
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }

  // Bytes queued for writing and not yet written (tests; a slow reader's backlog).
  size_t pending_write_bytes() const;

 private:
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  void OnBody(boost::system::error_code ec);
  void StartTimer();
  void Dispatch();
  void Enqueue(std::string bytes);
  void WriteNext();
  void OnWritten(boost::system::error_code ec);
  void AnswerDone();
  void Watch();
  void OnWatch(boost::system::error_code ec, size_t n);
  void ReplyAndClose(int status, const std::string& message, const std::string& type);
  void Close(bool client_gone);
  void LingeringClose();
  void DiscardInput();

  boost::asio::ip::tcp::socket socket_;
  HttpHandler& handler_;
  HttpLimits limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  boost::asio::steady_timer timer_;
  bool timed_out_ = false;
  bool reading_ = false;  // a request is being read (the timer applies)

  // The current answer.
  bool answering_ = false;       // a request was handed to the handler and its answer is not complete
  bool answer_complete_ = false; // the last bytes of the answer are queued
  bool streaming_ = false;
  bool keep_alive_ = true;
  std::function<void()> on_disconnect_;

  // Writing: one async_write at a time; whatever is queued meanwhile goes out in the next one.
  std::deque<std::string> queue_;
  std::string writing_buffer_;
  bool writing_ = false;

  // The disconnect watch: a read pending while answering. Bytes it gets (a pipelined next request) stay in
  // buffer_ for the next parse.
  bool watching_ = false;
  bool read_after_watch_ = false;  // the watch was cancelled to read the next request
  bool closed_ = false;
};

// "HTTP/1.1 200 OK\r\n" + headers + "\r\n": the head of a response.
std::string ResponseHead(int status, const Headers& headers);

}  // namespace parallm::server
