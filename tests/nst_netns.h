/*
 * nst_netns.h - test support: sockets inside the network namespaces a test
 * builds (/run/netns/NAME), made from the test's own thread, so that one
 * thread can play client and server on both sides of a gateway.
 */
#ifndef NST_NETNS_H
#define NST_NETNS_H

#include <stdint.h>

/* A socket of type (SOCK_STREAM, SOCK_DGRAM) bound to addr:port (host
 * order) inside namespace ns, reads timing out after 3 s; asserts it. The
 * calling thread returns to its own namespace. */
int nst_socket_in(const char *ns, int type, uint32_t addr, uint16_t port);

/* Move the calling thread into namespace ns: nst_netns_visit (asserts it)
 * returns what nst_netns_back takes to come back; nst_enter_netns stays
 * there and aborts on failure (for threads other than the test's). */
int nst_netns_visit(const char *ns);
void nst_netns_back(int self);
void nst_enter_netns(const char *ns);

/* A TCP connection from client:port inside namespace client_ns to
 * server:server_port, whose listening socket is listener (addresses and
 * ports in host order); asserts it. Returns the client's end; *server_side
 * is the accepted end, *xaddr and *xport where the server saw it come
 * from (through a gateway: the translated source). */
int nst_tcp_connect(const char *client_ns, uint32_t client, uint16_t port,
		    uint32_t server, uint16_t server_port, int listener,
		    int *server_side, uint32_t *xaddr, uint16_t *xport);

/* Entries `conntrack -L` lists in namespace ns; the listing also makes
 * the kernel reap expired entries at once, rather than when its garbage
 * collector comes by. */
unsigned long nst_conntrack_count(const char *ns);

#endif
