// SPDX-License-Identifier: MIT
/* The one IPv4 address resolver of the socket-based transports. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "transport.h"

int psd_addr_resolve(const struct psd_addr *addr, struct sockaddr_in *sin)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int ret;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)addr->port);
	if (!addr->host[0] || !strcmp(addr->host, "0.0.0.0")) {
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	if (inet_pton(AF_INET, addr->host, &sin->sin_addr) == 1)
		return 0;
	ret = getaddrinfo(addr->host, NULL, &hints, &res);
	if (ret)
		return psd_set_errmsg(-EHOSTUNREACH, "cannot resolve '%s': %s",
				      addr->host, gai_strerror(ret));
	sin->sin_addr = ((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}
