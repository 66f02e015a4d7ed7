/* SPDX-License-Identifier: MIT */
/*
 * The logging and checking macros ps-lite programs use (dmlc's LOG,
 * CHECK, CHECK_EQ ... and ps-lite's LL), printing to stderr.  A failed
 * CHECK or LOG(FATAL) prints its message and aborts the process.
 */
#ifndef PS_INTERNAL_UTILS_H_
#define PS_INTERNAL_UTILS_H_

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>

namespace ps
{
namespace detail
{

enum LogLevel { kLogINFO, kLogWARNING, kLogERROR, kLogFATAL };

/* One line of log: written (and for FATAL, the process aborted) when the
 * statement that made it ends. */
class LogLine
{
public:
	LogLine(const char *file, int line, LogLevel level) : level_(level)
	{
		static const char *const names[] = { "INFO", "WARNING", "ERROR",
						     "FATAL" };
		std::time_t t = std::time(nullptr);
		char when[16];
		std::tm tm;

		localtime_r(&t, &tm);
		std::strftime(when, sizeof(when), "%H:%M:%S", &tm);
		os_ << "[" << when << "] " << file << ":" << line << " "
		    << names[level] << ": ";
	}
	~LogLine() noexcept(false)
	{
		os_ << "\n";
		std::fputs(os_.str().c_str(), stderr);
		std::fflush(stderr);
		if (level_ == kLogFATAL)
			std::abort();
	}
	std::ostream &stream()
	{
		return os_;
	}

private:
	LogLevel level_;
	std::ostringstream os_;
};

/* Swallows a log statement that is compiled out. */
struct LogVoid {
	template <typename T> LogVoid &operator<<(const T &)
	{
		return *this;
	}
};

/* The message of a failed comparison of @a and @b. */
template <typename A, typename B>
inline std::string *CheckFailed(const A &a, const B &b, const char *what)
{
	std::ostringstream os;
	os << "Check failed: " << what << " (" << a << " vs. " << b << ") ";
	return new std::string(os.str());
}

/* Each operand is evaluated once: CHECK_EQ(f(), 0) calls f() once. */
#define PS_DEFINE_CHECK(name, op)                                              \
	template <typename A, typename B>                                      \
	inline std::string *Check##name(const A &a, const B &b,                \
					const char *what)                      \
	{                                                                      \
		return (a op b) ? nullptr : CheckFailed(a, b, what);           \
	}
PS_DEFINE_CHECK(EQ, ==)
PS_DEFINE_CHECK(NE, !=)
PS_DEFINE_CHECK(LT, <)
PS_DEFINE_CHECK(LE, <=)
PS_DEFINE_CHECK(GT, >)
PS_DEFINE_CHECK(GE, >=)
#undef PS_DEFINE_CHECK

/* Takes the message of a failed check and prints it first. */
class CheckLine : public LogLine
{
public:
	CheckLine(const char *file, int line, std::string *msg)
	    : LogLine(file, line, kLogFATAL)
	{
		stream() << *msg;
		delete msg;
	}
};

template <typename T>
inline T *CheckNotNull(T *p, const char *what, const char *file, int line)
{
	if (!p)
		LogLine(file, line, kLogFATAL).stream()
			<< "Check notnull: " << what;
	return p;
}

} // namespace detail
} // namespace ps

#define LOG(severity)                                                          \
	::ps::detail::LogLine(__FILE__, __LINE__,                              \
			      ::ps::detail::kLog##severity)                    \
		.stream()
#define LOG_IF(severity, cond)                                                 \
	if (!(cond)) {                                                         \
	} else                                                                 \
		LOG(severity)
#define LL LOG(ERROR)

/* A while whose body aborts: no dangling else, a message can follow. */
#define CHECK(x)                                                               \
	while (!(x))                                                           \
	LOG(FATAL) << "Check failed: " #x " "
#define PS_CHECK_OP(name, op, a, b)                                            \
	while (std::string *ps_check_msg_ =                                    \
		       ::ps::detail::Check##name((a), (b), #a " " #op " " #b)) \
	::ps::detail::CheckLine(__FILE__, __LINE__, ps_check_msg_).stream()
#define CHECK_EQ(a, b)	 PS_CHECK_OP(EQ, ==, a, b)
#define CHECK_NE(a, b)	 PS_CHECK_OP(NE, !=, a, b)
#define CHECK_LT(a, b)	 PS_CHECK_OP(LT, <, a, b)
#define CHECK_LE(a, b)	 PS_CHECK_OP(LE, <=, a, b)
#define CHECK_GT(a, b)	 PS_CHECK_OP(GT, >, a, b)
#define CHECK_GE(a, b)	 PS_CHECK_OP(GE, >=, a, b)
#define CHECK_NOTNULL(x) ::ps::detail::CheckNotNull((x), #x, __FILE__, __LINE__)

#ifdef NDEBUG
#define DLOG(severity) ::ps::detail::LogVoid()
#define DCHECK(x)                                                              \
	while (false)                                                          \
	::ps::detail::LogVoid()
#else
#define DLOG(severity) LOG(severity)
#define DCHECK(x)      CHECK(x)
#endif

#ifndef DISALLOW_COPY_AND_ASSIGN
#define DISALLOW_COPY_AND_ASSIGN(T)                                            \
	T(const T &);                                                          \
	void operator=(const T &)
#endif

#endif
