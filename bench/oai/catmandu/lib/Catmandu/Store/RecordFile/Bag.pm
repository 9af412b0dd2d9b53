package Catmandu::Store::RecordFile::Bag;

use Catmandu::Sane;
use Moo;
use Catmandu::Hits;
use Cpanel::JSON::XS ();

with 'Catmandu::Bag';

sub _all {
    my ($self) = @_;
    open my $fh, '<', $self->store->file or return [];
    local $/;
    my $records = Cpanel::JSON::XS->new->utf8->decode(<$fh>);
    close $fh;
    return [sort { $a->{_id} cmp $b->{_id} } @$records];
}

sub generator {
    my ($self) = @_;
    my @all = @{$self->_all};
    sub { shift @all };
}

sub get {
    my ($self, $id) = @_;
    for my $r (@{$self->_all}) {
        return $r if $r->{_id} eq $id;
    }
    return undef;
}

sub add { die "read-only" }
sub delete { die "read-only" }
sub delete_all { die "read-only" }
sub drop { die "read-only" }
sub commit { 1 }

# One CQL term the provider sends, as a predicate.
sub _term {
    my ($t) = @_;
    $t =~ s/^\s*\(+\s*//;
    $t =~ s/\s*\)+\s*$//;
    return sub { 1 } if $t eq 'cql.allRecords';
    if ($t =~ /^(\w+)\s*(>=|<=|=|exact)\s*"([^"]*)"$/) {
        my ($field, $op, $value) = ($1, $2, $3);
        return sub { defined $_[0]{$field} && $_[0]{$field} ge $value } if $op eq '>=';
        return sub { defined $_[0]{$field} && $_[0]{$field} le $value } if $op eq '<=';
        return sub {
            my $v = $_[0]{$field};
            return 0 unless defined $v;
            return scalar grep { $_ eq $value } @$v if ref $v eq 'ARRAY';
            return $v eq $value;
        };
    }
    die "unsupported CQL term: $t";
}

sub search {
    my ($self, %args) = @_;
    my @preds = map { _term($_) } split /\s+and\s+/, ($args{cql_query} // 'cql.allRecords');
    my @hits = grep { my $r = $_; !grep { !$_->($r) } @preds } @{$self->_all};
    my $start = $args{start} // 0;
    my $limit = $args{limit} // 100;
    my @page = grep { defined } @hits[$start .. $start + $limit - 1];
    return Catmandu::Hits->new(start => $start, limit => $limit, total => scalar @hits, hits => \@page);
}

1;
