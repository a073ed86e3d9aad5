// SPDX-License-Identifier: Apache-2.0
/*
 * test_serial.c - drives the 16550A model through serial_io exactly as a
 * vCPU's port I/O exit would, replaying what Linux's 8250 driver does.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "vmm/devices/serial.h"
#include "tests/unit/state_file.h"

#define RBR 0
#define IER 1
#define IIR 2
#define FCR 2
#define LCR 3
#define MCR 4
#define LSR 5
#define MSR 6
#define SCR 7

struct irq_recorder {
	int level;
	int raises;
	int calls;
};

struct captured_output {
	uint8_t bytes[4096];
	size_t len;
	int calls;
	size_t last_call_len;
};

static struct serial uart;
static struct irq_recorder irq;
static struct captured_output output;

static void record_irq(void *ctx, uint32_t gsi, int level)
{
	struct irq_recorder *rec = ctx;

	cr_assert_eq(gsi, SERIAL_COM1_IRQ);
	rec->level = level;
	rec->calls++;
	if (level)
		rec->raises++;
}

static void capture(void *ctx, const uint8_t *buf, size_t len)
{
	struct captured_output *out = ctx;

	cr_assert_leq(out->len + len, sizeof(out->bytes));
	memcpy(out->bytes + out->len, buf, len);
	out->len += len;
	out->calls++;
	out->last_call_len = len;
}

static void init_uart(struct serial *s, struct irq_recorder *rec)
{
	struct irq_line line = {
		.set_level = record_irq,
		.ctx = rec,
		.gsi = SERIAL_COM1_IRQ,
	};

	memset(rec, 0, sizeof(*rec));
	cr_assert_eq(serial_init(s, line, capture, &output), 0);
}

static void setup(void)
{
	memset(&output, 0, sizeof(output));
	init_uart(&uart, &irq);
}

static void teardown(void)
{
	serial_destroy(&uart);
}

static uint8_t port_read(struct serial *s, uint64_t port)
{
	uint8_t value = 0x5a;

	serial_io(s, port, &value, 1, false);
	return value;
}

static void port_write(struct serial *s, uint64_t port, uint8_t value)
{
	serial_io(s, port, &value, 1, true);
}

static uint8_t uart_read(uint64_t port)
{
	return port_read(&uart, port);
}

static void uart_write(uint64_t port, uint8_t value)
{
	port_write(&uart, port, value);
}

static void send(const char *text)
{
	for (; *text; text++)
		uart_write(RBR, (uint8_t)*text);
}

TestSuite(serial, .init = setup, .fini = teardown);

Test(serial, init_rejects_missing_sink)
{
	struct serial other;

	cr_assert_eq(serial_init(&other, (struct irq_line){ 0 }, NULL, NULL),
		     -1);
}

Test(serial, autoconfig_identifies_16550a)
{
	uint8_t saved_ier, mcr;
	int count;

	/* IER existence test. */
	saved_ier = uart_read(IER);
	uart_write(IER, 0);
	cr_assert_eq(uart_read(IER) & 0x0f, 0);
	uart_write(IER, 0x0f);
	cr_assert_eq(uart_read(IER) & 0x0f, 0x0f);
	uart_write(IER, saved_ier);

	/* Loopback test: OUT2 -> DCD, RTS -> CTS. */
	uart_write(MCR, 0x10 | 0x0a);
	cr_assert_eq(uart_read(MSR) & 0xf0, 0x90);
	uart_write(MCR, 0);

	/* EFR clear, then FIFO enable shows both IIR FIFO bits. */
	uart_write(LCR, 0xbf);
	uart_write(FCR, 0);
	uart_write(LCR, 0);
	uart_write(FCR, 0x01);
	cr_assert_eq(uart_read(IIR) >> 6, 3);

	/* No EFR in either configuration mode. */
	uart_write(LCR, 0x80);
	cr_assert_neq(uart_read(IIR), 0);
	uart_write(LCR, 0xbf);
	cr_assert_neq(uart_read(IIR), 0);

	/* Not a National Semiconductor SuperIO: EXCR1 does not track LOOP. */
	uart_write(LCR, 0);
	mcr = uart_read(MCR);
	uart_write(LCR, 0xe0);
	cr_assert_eq((uart_read(IIR) ^ mcr) & 0x10, 0);
	uart_write(LCR, 0);
	uart_write(MCR, mcr ^ 0x10);
	uart_write(LCR, 0xe0);
	cr_assert_eq((uart_read(IIR) ^ mcr) & 0x10, 0);
	uart_write(LCR, 0);
	uart_write(MCR, mcr);

	/* Not a TI16750: no 64-byte FIFO bit, with or without DLAB. */
	uart_write(FCR, 0x21);
	cr_assert_eq(uart_read(IIR) >> 5, 6);
	uart_write(FCR, 0x01);
	uart_write(LCR, 0x80);
	uart_write(FCR, 0x21);
	cr_assert_eq(uart_read(IIR) >> 5, 6);
	uart_write(FCR, 0x01);
	uart_write(LCR, 0);

	/* Not an Xscale: IER bit 6 does not stick. */
	uart_write(IER, 0x40);
	cr_assert_eq(uart_read(IER) & 0x40, 0);
	uart_write(IER, 0);

	/* size_fifo(): a loopback flood must not look like a 64-byte FIFO,
	 * and nothing sent in loopback reaches the console. */
	uart_write(FCR, 0x07);
	uart_write(MCR, 0x10);
	for (int i = 0; i < 256; i++)
		uart_write(RBR, (uint8_t)i);
	for (count = 0; (uart_read(LSR) & 0x01) && count < 256; count++)
		uart_read(RBR);
	cr_assert_neq(count, 64);
	uart_write(MCR, 0);
	serial_flush(&uart);
	cr_assert_eq(output.len, 0);
}

Test(serial, scratch_register_holds_a_byte)
{
	uart_write(SCR, 0xa5);
	cr_assert_eq(uart_read(SCR), 0xa5);
	uart_write(SCR, 0x5a);
	cr_assert_eq(uart_read(SCR), 0x5a);
}

Test(serial, divisor_latch_round_trip)
{
	uart_write(IER, 0x05);
	uart_write(LCR, 0x83);
	uart_write(RBR, 0x0c);
	uart_write(IER, 0x01);
	cr_assert_eq(uart_read(RBR), 0x0c);
	cr_assert_eq(uart_read(IER), 0x01);
	uart_write(LCR, 0x03);
	cr_assert_eq(uart_read(LCR), 0x03);
	/* With DLAB clear the same offsets are IER and the data path again. */
	cr_assert_eq(uart_read(IER), 0x05);
	uart_write(LCR, 0x83);
	cr_assert_eq(uart_read(RBR), 0x0c);
	cr_assert_eq(uart_read(IER), 0x01);
	serial_flush(&uart);
	cr_assert_eq(output.len, 0, "divisor writes must not transmit");
}

Test(serial, lsr_reports_transmitter_empty)
{
	cr_assert_eq(uart_read(LSR), 0x60);
	send("x");
	cr_assert_eq(uart_read(LSR), 0x60);
}

Test(serial, output_reaches_sink_line_by_line)
{
	send("hello\nwor");
	cr_assert_eq(output.calls, 1);
	cr_assert_eq(output.len, 6);
	cr_assert_arr_eq(output.bytes, "hello\n", 6);

	send("ld\n");
	cr_assert_eq(output.calls, 2);
	cr_assert_eq(output.last_call_len, 6);
	cr_assert_arr_eq(output.bytes, "hello\nworld\n", 12);

	send("tail");
	cr_assert_eq(output.calls, 2);
	serial_flush(&uart);
	cr_assert_eq(output.calls, 3);
	cr_assert_arr_eq(output.bytes + 12, "tail", 4);
	serial_flush(&uart);
	cr_assert_eq(output.calls, 3, "empty flush must not call the sink");
}

Test(serial, full_buffer_is_flushed_without_newline)
{
	for (int i = 0; i < SERIAL_OUTPUT_BUFFER_SIZE + 10; i++)
		uart_write(RBR, 'a');
	cr_assert_eq(output.calls, 1);
	cr_assert_eq(output.len, SERIAL_OUTPUT_BUFFER_SIZE);
	serial_flush(&uart);
	cr_assert_eq(output.len, SERIAL_OUTPUT_BUFFER_SIZE + 10);
}

/* serial8250_do_startup: the THRE re-assertion test and the TXEN test. */
Test(serial, startup_thre_test_passes)
{
	uint8_t iir1, iir, lsr;

	uart_write(FCR, 0x07);
	uart_write(FCR, 0);
	uart_read(LSR);
	uart_read(RBR);
	uart_read(IIR);
	uart_read(MSR);
	cr_assert_neq(uart_read(LSR), 0xff);

	uart_write(IER, 0x02);
	iir1 = uart_read(IIR);
	uart_write(IER, 0);
	uart_write(IER, 0x02);
	iir = uart_read(IIR);
	uart_write(IER, 0);
	cr_assert_eq(iir1, 0x02);
	cr_assert_eq(iir, 0x02, "THRE must re-assert (else UART_BUG_THRE)");
	cr_assert_eq(irq.raises, 0, "no interrupt without OUT2");

	uart_write(LCR, 0x03);
	uart_write(MCR, 0x08 | 0x03);
	uart_write(IER, 0x02);
	lsr = uart_read(LSR);
	iir = uart_read(IIR);
	uart_write(IER, 0);
	cr_assert(lsr & 0x40);
	cr_assert_eq(iir & 0x01, 0, "TX interrupt must show (else BUG_TXEN)");
}

Test(serial, thri_drives_the_line_only_with_out2)
{
	uart_write(IER, 0x02);
	cr_assert_eq(irq.level, 0);
	uart_write(MCR, 0x08);
	cr_assert_eq(irq.level, 1);
	uart_write(MCR, 0x00);
	cr_assert_eq(irq.level, 0);
	uart_write(MCR, 0x08);
	cr_assert_eq(irq.level, 1);

	/* Reading IIR acknowledges THRE. */
	cr_assert_eq(uart_read(IIR), 0x02);
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(uart_read(IIR), 0x01);

	/* Each transmitted byte empties THR again: pending once more. */
	send("a");
	cr_assert_eq(irq.level, 1);
	cr_assert_eq(uart_read(IIR), 0x02);
	cr_assert_eq(irq.level, 0);

	/* Disabling THRI drops it; re-enabling re-asserts it. */
	send("b");
	cr_assert_eq(irq.level, 1);
	uart_write(IER, 0);
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(uart_read(IIR), 0x01);
	uart_write(IER, 0x02);
	cr_assert_eq(irq.level, 1);
}

Test(serial, received_bytes_set_dr_and_interrupt)
{
	uart_write(MCR, 0x08);
	uart_write(IER, 0x01);
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(uart_read(LSR) & 0x01, 0);

	cr_assert_eq(serial_receive(&uart, (const uint8_t *)"ab", 2), 2);
	cr_assert_eq(uart_read(LSR) & 0x01, 0x01);
	cr_assert_eq(irq.level, 1);
	cr_assert_eq(uart_read(IIR), 0x04);
	cr_assert_eq(uart_read(RBR), 'a');
	cr_assert_eq(irq.level, 1);
	cr_assert_eq(uart_read(RBR), 'b');
	cr_assert_eq(uart_read(LSR) & 0x01, 0);
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(uart_read(IIR), 0x01);
}

Test(serial, received_data_outranks_thre)
{
	uart_write(MCR, 0x08);
	uart_write(IER, 0x03);
	serial_receive(&uart, (const uint8_t *)"z", 1);
	cr_assert_eq(uart_read(IIR), 0x04);
	cr_assert_eq(uart_read(RBR), 'z');
	cr_assert_eq(uart_read(IIR), 0x02);
}

Test(serial, receive_without_rdi_does_not_interrupt)
{
	uart_write(MCR, 0x08);
	serial_receive(&uart, (const uint8_t *)"q", 1);
	cr_assert_eq(uart_read(LSR) & 0x01, 0x01);
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(irq.raises, 0);
}

Test(serial, receive_fifo_is_bounded)
{
	uint8_t input[SERIAL_RX_FIFO_SIZE + 36];

	for (size_t i = 0; i < sizeof(input); i++)
		input[i] = (uint8_t)i;
	cr_assert_eq(serial_receive(&uart, input, sizeof(input)),
		     SERIAL_RX_FIFO_SIZE);
	cr_assert_eq(serial_receive(&uart, input, 1), 0);
	cr_assert_eq(uart_read(RBR), 0);
	cr_assert_eq(serial_receive(&uart, input + SERIAL_RX_FIFO_SIZE, 1), 1);
	for (int i = 1; i < SERIAL_RX_FIFO_SIZE; i++)
		cr_assert_eq(uart_read(RBR), i);
	cr_assert_eq(uart_read(RBR), SERIAL_RX_FIFO_SIZE);
	cr_assert_eq(uart_read(LSR) & 0x01, 0);
}

Test(serial, fifo_reset_drops_received_bytes)
{
	serial_receive(&uart, (const uint8_t *)"abc", 3);
	uart_write(FCR, 0x01 | 0x02);
	cr_assert_eq(uart_read(LSR) & 0x01, 0);
}

Test(serial, loopback_modem_change_interrupts)
{
	uart_write(MCR, 0x08);
	uart_write(IER, 0x08);
	cr_assert_eq(irq.level, 0);
	/* Loopback with OUT2 and RTS keeps DCD and CTS but drops DSR. */
	uart_write(MCR, 0x08 | 0x10 | 0x02);
	cr_assert_eq(irq.level, 1);
	cr_assert_eq(uart_read(IIR), 0x00);
	cr_assert_eq(uart_read(MSR) & 0x0f, 0x02, "only DDSR");
	cr_assert_eq(irq.level, 0);
	cr_assert_eq(uart_read(MSR), 0x90);
}

/* --- Snapshot state ----------------------------------------------------- */

/* Everything the guest can read, in an order that consumes one byte of the
 * FIFO and acknowledges the interrupts on the way. */
#define DUMP_SIZE 17

static void read_all_registers(struct serial *s, uint8_t regs[DUMP_SIZE])
{
	int n = 0;

	regs[n++] = port_read(s, LCR);
	regs[n++] = port_read(s, MCR);
	regs[n++] = port_read(s, IER);
	regs[n++] = port_read(s, SCR);
	regs[n++] = port_read(s, LSR);
	regs[n++] = port_read(s, IIR);
	regs[n++] = port_read(s, MSR);
	regs[n++] = port_read(s, MSR);
	regs[n++] = port_read(s, RBR);
	regs[n++] = port_read(s, IIR);
	regs[n++] = port_read(s, IIR);
	port_write(s, LCR, 0x83);
	regs[n++] = port_read(s, RBR);
	regs[n++] = port_read(s, IER);
	port_write(s, LCR, 0x03);
	regs[n++] = port_read(s, RBR);
	regs[n++] = port_read(s, LSR);
	regs[n++] = port_read(s, RBR);
	regs[n++] = port_read(s, LSR);
	cr_assert_eq(n, DUMP_SIZE);
}

/* Restoring @raw into a fresh UART must fail and leave it as it was. */
static void expect_rejected(const void *raw, size_t size)
{
	struct state_reader r;
	struct serial fresh;
	struct irq_recorder rec;
	struct serial_state before;

	state_file_one_section(&r, STATE_DEV_SERIAL, raw, size);
	init_uart(&fresh, &rec);
	memcpy(&before, &fresh.state, sizeof(before));
	cr_assert_eq(serial_restore(&fresh, &r), -1);
	cr_assert_eq(memcmp(&fresh.state, &before, sizeof(before)), 0);
	cr_assert_eq(rec.calls, 0, "the IRQ line was touched");
	serial_destroy(&fresh);
	state_reader_close(&r);
}

/* Saves the test's UART and restores it into @restored, reporting to @rec. */
static void save_and_restore(struct serial *restored, struct irq_recorder *rec)
{
	struct state_writer w;
	struct state_reader r;

	state_writer_init(&w);
	serial_save(&uart, &w);
	state_file_through(&w, &r);
	init_uart(restored, rec);
	cr_assert_eq(serial_restore(restored, &r), 0);
	state_reader_close(&r);
}

Test(serial, state_round_trip)
{
	uint8_t want[DUMP_SIZE], got[DUMP_SIZE];
	struct serial restored;
	struct irq_recorder rec;

	uart_write(LCR, 0x83);
	uart_write(RBR, 0x0c);
	uart_write(IER, 0x01);
	uart_write(LCR, 0x03);
	uart_write(FCR, 0x01);
	uart_write(SCR, 0xa5);
	/* Through loopback and back: DSR toggled, so MSR has DDSR. */
	uart_write(MCR, 0x08 | 0x10 | 0x02);
	uart_write(MCR, 0x08 | 0x03);
	uart_write(IER, 0x03);
	serial_receive(&uart, (const uint8_t *)"wxyz", 4);
	cr_assert_eq(uart_read(RBR), 'w', "the FIFO no longer starts at 0");
	cr_assert_eq(irq.level, 1);

	save_and_restore(&restored, &rec);
	cr_assert_eq(rec.level, 1, "the pending interrupt was not re-driven");

	read_all_registers(&uart, want);
	read_all_registers(&restored, got);
	cr_assert_arr_eq(got, want, sizeof(want));
	cr_assert_eq(got[8], 'x');
	cr_assert_eq(got[11], 0x0c);
	cr_assert_eq(rec.level, irq.level);
	serial_destroy(&restored);
}

Test(serial, restore_drives_a_quiet_line_low)
{
	struct serial restored;
	struct irq_recorder rec;

	save_and_restore(&restored, &rec);
	/* KVM's restored irqchip may hold the line high: say it is low. */
	cr_assert_eq(rec.calls, 1);
	cr_assert_eq(rec.level, 0);
	serial_destroy(&restored);
}

Test(serial, restore_rejects_impossible_state)
{
	struct serial_state s = uart.state;
	uint8_t raw[sizeof(s)];

	s.rx_count = 300;
	expect_rejected(&s, sizeof(s));
	s = uart.state;
	s.rx_head = SERIAL_RX_FIFO_SIZE;
	expect_rejected(&s, sizeof(s));
	s = uart.state;
	s.ier = 0x40;
	expect_rejected(&s, sizeof(s));
	s = uart.state;
	s.mcr = 0x20;
	expect_rejected(&s, sizeof(s));
	s = uart.state;
	s.msr_delta = 0x10;
	expect_rejected(&s, sizeof(s));

	memcpy(raw, &uart.state, sizeof(raw));
	raw[offsetof(struct serial_state, fifo_enabled)] = 2;
	expect_rejected(raw, sizeof(raw));
	memcpy(raw, &uart.state, sizeof(raw));
	raw[offsetof(struct serial_state, thr_empty_pending)] = 0xff;
	expect_rejected(raw, sizeof(raw));

	expect_rejected(raw, sizeof(raw) - 1);
}

Test(serial, restore_needs_its_section)
{
	struct state_reader r;
	struct serial fresh;
	struct irq_recorder rec;

	state_file_one_section(&r, STATE_DEV_RTC, &uart.state,
			       sizeof(uart.state));
	init_uart(&fresh, &rec);
	cr_assert_eq(serial_restore(&fresh, &r), -1);
	serial_destroy(&fresh);
	state_reader_close(&r);
}
