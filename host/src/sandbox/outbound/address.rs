//! Which addresses a request may connect to. A listed *name* that resolves
//! to a loopback, private, link-local, metadata or otherwise non-public
//! address is refused (no SSRF through DNS), unless that very address is
//! listed as an IP-literal origin.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// What kind of address an IP is, as far as outbound requests care.
///
/// ```
/// use skillhost::AddressClass;
/// assert_eq!(AddressClass::of("10.1.2.3".parse().unwrap()), AddressClass::Private);
/// assert_eq!(AddressClass::of("::ffff:127.0.0.1".parse().unwrap()), AddressClass::Loopback);
/// assert_eq!(AddressClass::of("93.184.215.14".parse().unwrap()), AddressClass::Public);
/// assert!(!AddressClass::Metadata.is_public());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressClass {
    /// A globally routed address: the only class reachable through a name.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`; IPv6 site-local `fec0::/10`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT (RFC 6598).
    SharedCgnat,
    /// `fc00::/7`, IPv6 unique local (RFC 4193).
    UniqueLocal,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// A cloud instance-metadata service: `169.254.169.254`,
    /// `fd00:ec2::254`, `100.100.100.200`.
    Metadata,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// `240/4` (reserved for future use), `192.0.0/24` (IETF protocol
    /// assignments), `198.18/15` (benchmarking), the documentation ranges.
    Reserved,
}

impl AddressClass {
    /// Classifies `ip`. An IPv4 address embedded in IPv6 (mapped
    /// `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`,
    /// 6to4 `2002::/16`) is classified as that IPv4 address.
    ///
    /// ```
    /// use skillhost::AddressClass;
    /// assert_eq!(AddressClass::of("169.254.169.254".parse().unwrap()), AddressClass::Metadata);
    /// ```
    pub fn of(ip: IpAddr) -> AddressClass {
        match ip {
            IpAddr::V4(v4) => classify_v4(v4),
            IpAddr::V6(v6) => classify_v6(v6),
        }
    }

    /// Whether a request may reach this address through a listed name.
    ///
    /// ```
    /// assert!(skillhost::AddressClass::Public.is_public());
    /// ```
    pub fn is_public(self) -> bool {
        self == AddressClass::Public
    }

    /// The class as it is spelled in records and messages.
    ///
    /// ```
    /// assert_eq!(skillhost::AddressClass::LinkLocal.as_str(), "link-local");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            AddressClass::Public => "public",
            AddressClass::Loopback => "loopback",
            AddressClass::Private => "private",
            AddressClass::SharedCgnat => "shared-cgnat",
            AddressClass::UniqueLocal => "unique-local",
            AddressClass::LinkLocal => "link-local",
            AddressClass::Metadata => "metadata",
            AddressClass::Unspecified => "unspecified",
            AddressClass::Multicast => "multicast",
            AddressClass::Broadcast => "broadcast",
            AddressClass::Reserved => "reserved",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        AddressClass::Metadata
    } else if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_private() {
        AddressClass::Private
    } else if a == 100 && (64..128).contains(&b) {
        AddressClass::SharedCgnat
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if a == 0 {
        AddressClass::Unspecified
    } else if ip.is_broadcast() {
        AddressClass::Broadcast
    } else if ip.is_multicast() {
        AddressClass::Multicast
    } else if a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        || ip.is_documentation()
    {
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x254) {
        return AddressClass::Metadata;
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    if ip.is_unspecified() {
        return AddressClass::Unspecified;
    }
    // IPv4 inside IPv6: mapped (::ffff:0:0/96), compatible (::/96), NAT64
    // (64:ff9b::/96) and 6to4 (2002::/16) reach that IPv4 address.
    let low32 =
        (s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0)) || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let embedded = if low32 {
        Some(Ipv4Addr::from(u128::from(ip) as u32))
    } else if s[0] == 0x2002 {
        Some(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32))
    } else {
        None
    };
    if let Some(v4) = embedded {
        return classify_v4(v4);
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddressClass::UniqueLocal,
        x if x & 0xffc0 == 0xfe80 => AddressClass::LinkLocal,
        x if x & 0xffc0 == 0xfec0 => AddressClass::Private,
        x if x & 0xff00 == 0xff00 => AddressClass::Multicast,
        // 2001:db8::/32, documentation.
        0x2001 if s[1] == 0x0db8 => AddressClass::Reserved,
        _ => AddressClass::Public,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_classification() {
        let cases: &[(&str, AddressClass)] = &[
            ("127.0.0.1", AddressClass::Loopback),
            ("127.255.0.9", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::127.0.0.1", AddressClass::Loopback),
            ("64:ff9b::7f00:1", AddressClass::Loopback),
            ("2002:7f00:1::", AddressClass::Loopback),
            ("10.0.0.1", AddressClass::Private),
            ("10.255.255.255", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("172.31.255.255", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("::ffff:10.1.2.3", AddressClass::Private),
            ("::ffff:192.168.0.1", AddressClass::Private),
            ("fec0::1", AddressClass::Private),
            ("100.64.0.1", AddressClass::SharedCgnat),
            ("100.127.255.255", AddressClass::SharedCgnat),
            ("169.254.169.254", AddressClass::Metadata),
            ("::ffff:169.254.169.254", AddressClass::Metadata),
            ("fd00:ec2::254", AddressClass::Metadata),
            ("100.100.100.200", AddressClass::Metadata),
            ("169.254.1.1", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("febf::1", AddressClass::LinkLocal),
            ("fd00::1", AddressClass::UniqueLocal),
            ("fc00::1", AddressClass::UniqueLocal),
            ("0.0.0.0", AddressClass::Unspecified),
            ("0.1.2.3", AddressClass::Unspecified),
            ("::", AddressClass::Unspecified),
            ("224.0.0.1", AddressClass::Multicast),
            ("239.255.255.250", AddressClass::Multicast),
            ("ff02::1", AddressClass::Multicast),
            ("255.255.255.255", AddressClass::Broadcast),
            ("240.0.0.1", AddressClass::Reserved),
            ("192.0.2.1", AddressClass::Reserved),
            ("198.18.0.1", AddressClass::Reserved),
            ("2001:db8::1", AddressClass::Reserved),
            ("8.8.8.8", AddressClass::Public),
            ("172.15.255.255", AddressClass::Public),
            ("172.32.0.0", AddressClass::Public),
            ("100.63.255.255", AddressClass::Public),
            ("100.128.0.0", AddressClass::Public),
            ("192.169.0.1", AddressClass::Public),
            ("2606:4700::1111", AddressClass::Public),
            ("::ffff:8.8.8.8", AddressClass::Public),
        ];
        for (ip, class) in cases {
            let parsed: IpAddr = ip.parse().unwrap();
            assert_eq!(AddressClass::of(parsed), *class, "{ip}");
        }
    }
}
