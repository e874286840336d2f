// Internal to the HTTP server (http_server.h): how the server frames its
// responses on Boost.Beast. Handlers' headers cannot split a response, a
// status outside 200..999 goes out as 500, and 204/304 carry no body. Not for
// other modules.
#ifndef BEACON_SERVER_HTTP_HTTP_MESSAGE_H_
#define BEACON_SERVER_HTTP_HTTP_MESSAGE_H_

#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "server/http/http_server.h"

namespace beacon::http_internal {

namespace http = boost::beast::http;

inline bool SafeHeader(const std::pair<std::string, std::string>& h) {  // no response splitting
  return !h.first.empty() && h.first.find_first_of("\r\n:") == std::string::npos &&
         h.second.find_first_of("\r\n") == std::string::npos;
}

template <class Message>
void FillHead(Message& msg, int status, const std::string& content_type, const HttpHeaders& headers, bool keep_alive) {
  msg.version(11);
  msg.result(status >= 200 && status <= 999 ? status : 500);
  if (!content_type.empty()) msg.set(http::field::content_type, content_type);
  for (const auto& h : headers) {
    if (SafeHeader(h)) msg.insert(h.first, h.second);
  }
  msg.keep_alive(keep_alive);
}

using PlainMessage = http::response<http::string_body>;
inline std::shared_ptr<PlainMessage> MakeMessage(HttpResponse r, bool keep_alive) {
  auto msg = std::make_shared<PlainMessage>();
  FillHead(*msg, r.status, r.content_type, r.headers, keep_alive);
  const int code = msg->result_int();
  if (code == 204 || code == 304) r.body.clear();  // such responses have no body
  msg->body() = std::move(r.body);
  msg->prepare_payload();
  return msg;
}

struct StreamHead {  // the serializer refers to res, so neither may move
  http::response<http::empty_body> res;
  std::optional<http::response_serializer<http::empty_body>> sr;
};

}  // namespace beacon::http_internal

#endif  // BEACON_SERVER_HTTP_HTTP_MESSAGE_H_
