/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vsock.h - virtio-vsock device (virtio ID 19) for the host <-> guest-agent
 * channel, on the virtio-mmio transport.
 *
 * The host side is Firecracker's "hybrid vsock": vsock streams are relayed
 * to Unix stream sockets.
 *
 *   Host-initiated: a client connects to the socket at @uds_path and writes
 *   "CONNECT <port>\n".  The device sends the guest a REQUEST for <port> from
 *   a fresh host port and, on the guest's RESPONSE, answers the client
 *   "OK <host port>\n"; from then on the socket is the stream.  An RST from
 *   the guest (nobody listening), the client hanging up, or
 *   VSOCK_REQUEST_TIMEOUT_MS without an answer closes the client.  That
 *   time-out only frees the slot of a client that would wait forever for
 *   a guest that never answers; clients keep their own deadlines.  It is
 *   long because a guest that is merely slow (its kernel emulated on
 *   KVM-on-PVM, dozens of guests sharing two CPUs) must not look like one
 *   with nobody listening: a short one turned every connection to such a
 *   guest into a reset, retried and reset again.  A malformed handshake
 *   closes only that client.
 *
 *   Guest-initiated: a REQUEST to host port P is connected to the Unix
 *   socket "<uds_path>_<P>"; if nothing listens there the guest gets an RST.
 *
 * Queues are RX (device -> guest packets), TX (guest -> device) and EVENT,
 * which carries only TRANSPORT_RESET, sent once after a restore.
 *
 * Threading: the device has one thread of its own that does all the work:
 * it waits in epoll on the listening socket, the connection sockets and an
 * eventfd, processes TX, fills RX and raises interrupts through the
 * transport.  The transport's callbacks run on vCPU threads and only set
 * atomic flags and write the eventfd, so connection state needs no lock.
 *
 * Snapshots: the VMM pauses the vCPUs, then the device (vsock_pause: the
 * thread finishes its pass and waits, holding no descriptor chain), and saves
 * the transport and struct vsock_state.  Host sockets cannot be saved, so a
 * restored device starts with no connections, and its first act is to send
 * the guest a TRANSPORT_RESET: the guest then resets every connection it had
 * to the old host, while its listening sockets stay, so new host clients can
 * CONNECT as before.  Until that event is on the EVENT queue, RX carries
 * nothing, or the guest would reset the new connections with the old ones.
 *
 * The guest is untrusted: a short header, a len beyond the buffer, a wrong
 * CID, an unknown op or type, or a packet for no connection is dropped or
 * answered with RST, and a guest that ignores our credit is reset.  Packets
 * we owe the guest while its RX queue is full are bounded: at most one of
 * each control packet per connection, plus VSOCK_RST_BACKLOG stray RSTs,
 * beyond which RSTs are dropped (the guest then times out instead).
 */
#ifndef THAW_VMM_DEVICES_VSOCK_H
#define THAW_VMM_DEVICES_VSOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

#include "vmm/devices/device_thread.h"
#include "vmm/devices/virtio_mmio.h"
#include "vmm/devices/vsock_conn.h"
#include "vmm/irq.h"
#include "vmm/memory.h"
#include "snapshot/state.h"

#define VIRTIO_ID_VSOCK 19
#define VIRTIO_VSOCK_F_STREAM 0

#define VSOCK_HOST_CID 2
#define VSOCK_DEFAULT_GUEST_CID 3

#define VSOCK_QUEUE_RX 0
#define VSOCK_QUEUE_TX 1
#define VSOCK_QUEUE_EVENT 2
#define VSOCK_NUM_QUEUES 3
#define VSOCK_QUEUE_SIZE 256

#define VIRTIO_VSOCK_TYPE_STREAM 1

#define VIRTIO_VSOCK_OP_INVALID 0
#define VIRTIO_VSOCK_OP_REQUEST 1
#define VIRTIO_VSOCK_OP_RESPONSE 2
#define VIRTIO_VSOCK_OP_RST 3
#define VIRTIO_VSOCK_OP_SHUTDOWN 4
#define VIRTIO_VSOCK_OP_RW 5
#define VIRTIO_VSOCK_OP_CREDIT_UPDATE 6
#define VIRTIO_VSOCK_OP_CREDIT_REQUEST 7

#define VIRTIO_VSOCK_EVENT_TRANSPORT_RESET 0

#define VSOCK_MAX_CONNECTIONS 64
#define VSOCK_RST_BACKLOG 128
/* Largest RW payload we put in one RX buffer (Linux's own limit). */
#define VSOCK_MAX_PKT_PAYLOAD (64u * 1024)
/* Host client: handshake line, then the guest's RESPONSE. */
#define VSOCK_HANDSHAKE_TIMEOUT_MS 5000
#define VSOCK_REQUEST_TIMEOUT_MS 60000
/* A fully shut down connection waits this long for the guest's RST. */
#define VSOCK_CLOSE_TIMEOUT_MS 2000
/* Host ports for host-initiated connections, as Firecracker numbers them. */
#define VSOCK_LOCAL_PORT_FIRST (1u << 30)

/* Packet header, virtio 1.2 5.10.6; little endian like the host. */
struct virtio_vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));

_Static_assert(sizeof(struct virtio_vsock_hdr) == 44,
	       "virtio_vsock_hdr is 44 bytes on the wire");

/* EVENT queue element, virtio 1.2 5.10.6.4. */
struct virtio_vsock_event {
	uint32_t id;
};

_Static_assert(sizeof(struct virtio_vsock_event) == 4,
	       "virtio_vsock_event is 4 bytes on the wire");

/* An RST owed to the guest for a packet that has no connection. */
struct vsock_rst {
	uint64_t src_cid;
	uint32_t src_port;
	uint32_t dst_port;
};

/* Guest-visible device state beyond the transport's. */
struct vsock_state {
	uint64_t guest_cid;
	/*
	 * The next host port for a host-initiated connection.  Saved: a
	 * restored guest may still hold connections from the old ports until
	 * it handles the transport reset, and must not mistake a new one for
	 * them.
	 */
	uint32_t next_local_port;
	uint32_t reserved;
};

struct vsock {
	struct virtio_mmio transport; /* register this on the MMIO bus */
	struct vsock_state state;

	/* Owned by the device thread once started. */
	struct vsock_conn conns[VSOCK_MAX_CONNECTIONS];
	struct vsock_rst rst_backlog[VSOCK_RST_BACKLOG];
	uint32_t rst_head;
	uint32_t rst_count;
	uint32_t rx_cursor; /* round robin over conns, then the backlog */
	bool more_work;	    /* a queue was left non-empty: don't sleep */
	/* Since a restore: the guest must learn its old connections are gone
	 * before it sees new ones (vsock.c, send_reset_event). */
	enum {
		RESET_EVENT_NONE,
		RESET_EVENT_DUE,  /* not on the EVENT queue yet */
		RESET_EVENT_SENT, /* waiting for the driver to handle it */
	} reset_event;
	uint16_t reset_event_avail; /* EVENT avail->idx when it was sent */
	_Atomic uint64_t dropped;   /* guest packets ignored as malformed */
	/* VSOCK_REQUEST_TIMEOUT_MS; may be changed before vsock_start(). */
	uint32_t request_timeout_ms;

	char uds_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char thread_name[sizeof("vsock ") +
			 sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd;
	bool owns_path; /* we bound uds_path: ours to remove */
	struct device_thread thread;

	/* Set from vCPU threads. */
	atomic_bool reset_requested;
};

/*
 * Prepares the device: binds and listens on @uds_path (which must not exist
 * yet), or serves @listen_fd when it is not -1, a socket already listening
 * there (a jailed VMM's, which cannot reach the path); and sets up the
 * transport with @mem and @irq.  Returns 0, or -1 with a message naming
 * the path or CID.  After success call vsock_stop() once, whether or not
 * the thread was started.
 */
int vsock_init(struct vsock *vsock, uint64_t guest_cid, const char *uds_path,
	       int listen_fd, const struct guest_memory *mem,
	       struct irq_line irq);

/* Starts the device thread.  Returns 0, or -1 with a message. */
int vsock_start(struct vsock *vsock);

/*
 * Joins the device thread (paused or not), closes every socket and unlinks
 * @uds_path.  vCPU threads must no longer access the device.
 */
void vsock_stop(struct vsock *vsock);

/*
 * Returns once the device thread has stopped touching guest memory and the
 * queues, until vsock_resume().  Host sockets wait meanwhile.  Without a
 * started thread both do nothing.
 */
void vsock_pause(struct vsock *vsock);
void vsock_resume(struct vsock *vsock);

/*
 * Instead of vsock_start(), for tests and fuzzing: one pass of the device
 * thread's work on the calling thread, after waiting up to @timeout_ms for
 * a socket or a notification (0: not at all).  Returns 0, or -1 when
 * epoll_wait fails.
 */
int vsock_run_once(struct vsock *vsock, int timeout_ms);

/* Adds transport instance 0 and struct vsock_state; the device must be
 * paused or not started. */
void vsock_save(struct vsock *vsock, struct state_writer *w);

/*
 * Between vsock_init() and vsock_start(): installs the saved transport and
 * guest CID (the guest keeps its address) and, if the driver was live, makes
 * the thread send TRANSPORT_RESET once started.  Returns 0, or -1 after a
 * message with the device untouched.
 */
int vsock_restore(struct vsock *vsock, const struct state_reader *r);

/* For the MMIO bus: bus_register(bus, "vsock", base, VIRTIO_MMIO_WINDOW_SIZE,
 * vsock_transport(v), virtio_mmio_io). */
static inline struct virtio_mmio *vsock_transport(struct vsock *vsock)
{
	return &vsock->transport;
}

/*
 * The eventfd that wakes the device thread.  The VMM registers it as a KVM
 * ioeventfd on the transport's QueueNotify register, so a guest's queue
 * notification wakes the thread without a vCPU exit to user space.  Which
 * queue was named does not matter: every pass looks at all of them.
 */
static inline int vsock_notify_fd(const struct vsock *vsock)
{
	return vsock->thread.kick_fd;
}

#endif
