//! The RESP wire format: encoding commands and parsing replies.

use std::io::{self, BufRead};

use crate::Reply;

/// Deepest array nesting accepted, so a hostile peer cannot overflow the stack.
const MAX_DEPTH: usize = 32;
/// Largest bulk string accepted (Redis' own `proto-max-bulk-len` default).
const MAX_BULK: usize = 512 * 1024 * 1024;

/// Encodes one command as a RESP array of bulk strings.
pub(crate) fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one reply. Protocol violations are `io::ErrorKind::InvalidData`.
pub(crate) fn read_reply(reader: &mut impl BufRead) -> io::Result<Reply> {
    read_at_depth(reader, 0)
}

fn read_at_depth(reader: &mut impl BufRead, depth: usize) -> io::Result<Reply> {
    if depth > MAX_DEPTH {
        return Err(invalid("arrays nested too deeply"));
    }
    let line = read_line(reader)?;
    let mut chars = line.chars();
    let kind = chars.next().ok_or_else(|| invalid("empty reply line"))?;
    let rest = chars.as_str();
    match kind {
        '+' => Ok(Reply::Simple(rest.to_owned())),
        '-' => Ok(Reply::Error(rest.to_owned())),
        ':' => parse_int(rest).map(Reply::Int),
        '_' => Ok(Reply::Nil),
        '$' => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let len = usize::try_from(len).map_err(|_| invalid("bulk length"))?;
            if len > MAX_BULK {
                return Err(invalid("bulk string too long"));
            }
            let mut buf = vec![0; len + 2];
            reader.read_exact(&mut buf)?;
            if !buf.ends_with(b"\r\n") {
                return Err(invalid("bulk string not terminated by CRLF"));
            }
            buf.truncate(len);
            Ok(Reply::Bulk(String::from_utf8_lossy(&buf).into_owned()))
        }
        '*' => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let len = usize::try_from(len).map_err(|_| invalid("array length"))?;
            let mut items = Vec::with_capacity(len.min(1024));
            for _ in 0..len {
                items.push(read_at_depth(reader, depth + 1)?);
            }
            Ok(Reply::Array(items))
        }
        other => Err(invalid(&format!("unexpected reply type {other:?}"))),
    }
}

/// Reads one CRLF-terminated line without the terminator; EOF is `UnexpectedEof`.
fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut raw = Vec::new();
    let n = reader.read_until(b'\n', &mut raw)?;
    if n == 0 || !raw.ends_with(b"\r\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed in the middle of a reply",
        ));
    }
    raw.truncate(raw.len() - 2);
    if raw.is_empty() {
        return Err(invalid("empty reply line"));
    }
    String::from_utf8(raw).map_err(|_| invalid("reply line is not UTF-8"))
}

fn parse_int(s: &str) -> io::Result<i64> {
    s.parse()
        .map_err(|_| invalid(&format!("{s:?} is not an integer")))
}

fn invalid(detail: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, detail.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut io::BufReader::new(bytes))
    }

    #[test]
    fn encodes_a_command() {
        assert_eq!(encode(&["GET", "k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }

    #[test]
    fn parses_every_type() -> io::Result<()> {
        assert_eq!(parse(b"+OK\r\n")?, Reply::Simple("OK".into()));
        assert_eq!(parse(b"-ERR no\r\n")?, Reply::Error("ERR no".into()));
        assert_eq!(parse(b":-7\r\n")?, Reply::Int(-7));
        assert_eq!(parse(b"$-1\r\n")?, Reply::Nil);
        assert_eq!(parse(b"$3\r\na\r\n\r\n")?, Reply::Bulk("a\r\n".into()));
        assert_eq!(
            parse(b"*2\r\n$1\r\n1\r\n*0\r\n")?,
            Reply::Array(vec![Reply::Bulk("1".into()), Reply::Array(vec![])])
        );
        Ok(())
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert_eq!(
            parse(b"?x\r\n").map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidData)
        );
        assert_eq!(
            parse(b"$5\r\nab").map_err(|e| e.kind()),
            Err(io::ErrorKind::UnexpectedEof)
        );
        assert_eq!(
            parse(b"").map_err(|e| e.kind()),
            Err(io::ErrorKind::UnexpectedEof)
        );
    }
}
