// HTTP/1.1 over Boost.Beast for the benchmark client (see http_client.h).
#include "bench/http_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

namespace parallm::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<BaseUrl> ParseBaseUrl(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  if (url.starts_with("https://")) return Err("{}: https is not supported (use an http:// address)", url);
  if (!url.starts_with(kHttp)) return Err("{}: expected a URL such as http://127.0.0.1:8000", url);
  std::string_view rest = url.substr(kHttp.size());
  BaseUrl out;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) out.prefix = std::string(rest.substr(slash));
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  if (authority.starts_with('[')) {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Err("{}: unterminated IPv6 address", url);
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (authority.starts_with(':')) out.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return Err("{}: no host", url);
  if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
    return Err("{}: bad port '{}'", url, out.port);
  return out;
}

std::string HttpOutcome::Describe() const {
  if (!error.empty()) return error;
  std::string message = body.substr(0, 300);
  // OpenAI's error body: {"error": {"message": ...}}; some servers put the message at the top level.
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (!ec && v.is_object()) {
    const boost::json::object& o = v.as_object();
    const boost::json::value* e = o.if_contains("error");
    if (e && e->is_object() && e->as_object().contains("message") && e->as_object().at("message").is_string())
      message = std::string(e->as_object().at("message").as_string());
    else if (e && e->is_string())
      message = std::string(e->as_string());
    else if (o.contains("message") && o.at("message").is_string())
      message = std::string(o.at("message").as_string());
  }
  return fmt::format("HTTP {}: {}", status, message);
}

asio::awaitable<HttpOutcome> Fetch(const asio::ip::tcp::resolver::results_type& endpoints, const BaseUrl& url,
                                   const HttpRequest& request, std::function<void(std::string_view)> on_body) {
  HttpOutcome out;
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  boost::system::error_code ec;
  auto fail = [&](const char* what) {
    if (ec == beast::error::timeout)
      out.error = fmt::format("{}: timed out after {:g} s with no answer from {}:{}", what,
                              request.idle_timeout.count() / 1e3, url.host, url.port);
    else
      out.error = fmt::format("{}: {} ({}:{})", what, ec.message(), url.host, url.port);
    return out;
  };

  stream.expires_after(request.idle_timeout);
  co_await stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("connect");
  stream.socket().set_option(asio::ip::tcp::no_delay(true), ec);

  http::request<http::string_body> req{request.method == "POST" ? http::verb::post : http::verb::get,
                                       request.target, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "parallm-bench");
  if (!url.api_key.empty()) req.set(http::field::authorization, "Bearer " + url.api_key);
  req.set(http::field::accept, request.body.empty() ? "application/json" : "text/event-stream, application/json");
  if (!request.body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = request.body;
  }
  req.prepare_payload();
  stream.expires_after(request.idle_timeout);
  co_await http::async_write(stream, req, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("send");

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  stream.expires_after(request.idle_timeout);
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fail("read");
  out.status = static_cast<int>(parser.get().result_int());
  const bool stream_body = on_body && out.status >= 200 && out.status < 300;

  // read_some, not read: a read returns as soon as some body bytes arrived, so each SSE chunk is timestamped
  // when it comes rather than when a buffer fills.
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    stream.expires_after(request.idle_timeout);
    co_await http::async_read_some(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = sizeof(chunk) - parser.get().body().size;
    if (got > 0) {
      if (stream_body)
        on_body(std::string_view(chunk, got));
      else
        out.body.append(chunk, got);
    }
    if (ec == http::error::end_of_stream && parser.is_done()) break;
    if (ec) co_return fail("read");
  }
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  co_return out;
}

HttpOutcome BlockingGet(const BaseUrl& url, const std::string& path, std::chrono::milliseconds timeout) {
  asio::io_context io;
  HttpOutcome out;
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    out.error = fmt::format("cannot resolve {}: {}", url.host, ec.message());
    return out;
  }
  HttpRequest request;
  request.target = url.prefix + path;
  request.idle_timeout = timeout;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { out = co_await Fetch(endpoints, url, request); }, asio::detached);
  io.run();
  return out;
}

std::vector<std::string> SseParser::Feed(std::string_view bytes) {
  pending_.append(bytes);
  std::vector<std::string> events;
  size_t start = 0;
  while (true) {
    // An event ends at a blank line; accept \n\n, \r\n\r\n and mixed endings.
    size_t end = std::string::npos, next = 0;
    for (size_t i = start; i < pending_.size(); ++i) {
      if (pending_[i] != '\n') continue;
      size_t j = i + 1;
      if (j < pending_.size() && pending_[j] == '\r') ++j;
      if (j < pending_.size() && pending_[j] == '\n') {
        end = i;
        next = j + 1;
        break;
      }
    }
    if (end == std::string::npos) break;
    std::string_view event(pending_.data() + start, end - start);
    std::string data;
    bool has_data = false;
    while (!event.empty()) {
      const size_t nl = event.find('\n');
      std::string_view line = event.substr(0, nl);
      event = nl == std::string_view::npos ? std::string_view() : event.substr(nl + 1);
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!line.starts_with("data:")) continue;  // comments (": ping"), event:, id:, retry:
      line.remove_prefix(5);
      if (line.starts_with(' ')) line.remove_prefix(1);
      if (has_data) data += '\n';
      data.append(line);
      has_data = true;
    }
    if (has_data) events.push_back(std::move(data));
    start = next;
  }
  pending_.erase(0, start);
  return events;
}

}  // namespace parallm::bench
